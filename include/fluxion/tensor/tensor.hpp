// fx::tensor<T, Device>: an immutable, reference-counted, row-major array of rank 0 to 8.
//
//   fx::tensor<float> x = {{1.f, 2.f}, {3.f, 4.f}};   // shape (2, 2)
//   fx::tensor<float> y = x * x + 1.f;                // one fused loop, one new buffer
//   float v = y(1, 0);                                 // 10
//
// Copying a tensor copies a handle; the data is never changed after construction (principle 1),
// so expressions, tapes and other threads may keep any tensor without copying it. Assigning an
// expression to a tensor materializes it: that is when the fused kernel runs.
#pragma once

#include <atomic>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../expr/forward.hpp"
#include "../expr/view.hpp"
#include "buffer.hpp"

namespace fluxion {
namespace detail {

/// Host <-> device copies; the cuda specialization lives in backend/cuda.
template <class Device>
struct device_memory;

/// Whether device_memory<Device>::queue_index_check checks indices on the device without waiting
/// for it (fx::cuda: backend/cuda/checks.hpp); elsewhere they are read and checked at once.
template <class Device>
inline constexpr bool queues_index_checks = false;

template <>
struct device_memory<cpu> {
  template <class T>
  static void to_device(T* dst, const T* src, index_t n) {
    if (n) std::memcpy(static_cast<void*>(dst), src, static_cast<std::size_t>(n) * sizeof(T));
  }
  template <class T>
  static void to_host(T* dst, const T* src, index_t n) {
    if (n) std::memcpy(static_cast<void*>(dst), src, static_cast<std::size_t>(n) * sizeof(T));
  }
};

/// The id of tensor::none(), which next_tensor_id() never gives.
inline constexpr std::uint64_t none_tensor_id = ~std::uint64_t{0};

/// A process-wide unique id for each new tensor value (copies share it): the gradient tape's
/// handle on tensors. Ids are made per thread without atomics: the thread's number in the high
/// bits, a counter in the low bits.
inline std::uint64_t next_tensor_id() noexcept {
  static std::atomic<std::uint64_t> threads{0};
  // Constant-initialized thread_locals: no initialization guard on this hot path.
  thread_local std::uint64_t base = 0;
  thread_local std::uint64_t counter = 0;
  if (base == 0) [[unlikely]]
    base = (threads.fetch_add(1, std::memory_order_relaxed) + 1) << 40;
  return base | ++counter;
}

/// One level of nested braces: a value or a list of levels. A single recursive type (rather
/// than one constructor per depth) keeps {{2.f}} and {{1.f}, {2.f}} unambiguous.
template <class T>
struct nested_values {
  nested_values(T v) : is_value(true), value(v) {}
  nested_values(std::initializer_list<nested_values> l) : list(l) {}
  bool is_value = false;
  T value{};
  std::initializer_list<nested_values> list;
};

}  // namespace detail

namespace detail {
/// Selects tensor's constructor that shares a buffer under a new shape (internal).
struct same_buffer_t {};
inline constexpr same_buffer_t same_buffer{};
}  // namespace detail

template <class T, class Device>
class tensor : public expression_base {
  static_assert(is_element_type_v<T>,
                "fluxion::tensor<T>: T must be float, double, std::int32_t, std::int64_t or bool.");
  static_assert(is_device_v<Device>, "fluxion::tensor<T, Device>: Device must be fluxion::cpu or fluxion::cuda.");

 public:
  using value_type = T;
  using device_type = Device;

  /// An empty tensor of shape (0,).
  tensor() { m_shape.make_empty(); }

  tensor(const tensor&) = default;
  tensor& operator=(const tensor&) = default;
  /// A moved-from tensor is empty, of shape (0,), rather than a shape over no storage.
  tensor(tensor&& o) noexcept
      : m_buffer(std::move(o.m_buffer)), m_data(std::exchange(o.m_data, nullptr)), m_shape(o.m_shape), m_id(o.m_id) {
    o.m_shape.make_empty();
  }
  tensor& operator=(tensor&& o) noexcept {
    m_buffer = std::move(o.m_buffer);
    m_data = std::exchange(o.m_data, nullptr);
    m_shape = o.m_shape;
    m_id = o.m_id;
    o.m_shape.make_empty();
    return *this;
  }

  /// A rank-0 tensor.
  tensor(T value) : tensor(fluxion::shape{}) { detail::device_memory<Device>::to_device(m_data, &value, 1); }

  /// Nested braces give the shape: {{1, 2}, {3, 4}} is (2, 2); {{2}} is (1, 1).
  tensor(std::initializer_list<detail::nested_values<T>> v) { from_nested(v); }

  /// Materializes an expression: the fused kernel runs here.
  template <expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, tensor> && std::is_same_v<value_type_t<E>, T> &&
             std::is_same_v<device_t<E>, Device>)
  tensor(const E& e) : tensor(detail::materialize(e)) {}
  /// An expression of another element type or device: the message below, and nothing else
  /// (delegating, as above, would pick this constructor again for the materialized tensor).
  template <expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, tensor> &&
             !(std::is_same_v<value_type_t<E>, T> && std::is_same_v<device_t<E>, Device>))
  tensor(const E&) : tensor() {
    static_assert(std::is_same_v<value_type_t<E>, T>,
                  "fluxion::tensor<T>: the expression's element type differs from T; convert it with "
                  "fluxion::cast<T>(expr) first.");
    static_assert(std::is_same_v<device_t<E>, Device>,
                  "fluxion::tensor<T, Device>: the expression lives on another device; move it with "
                  "fluxion::to<Device>(expr) first.");
  }

  template <expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, tensor>)
  tensor& operator=(const E& e) {
    return *this = tensor(e);
  }

  /// An uninitialized tensor of the given shape (internal: kernels fill it).
  explicit tensor(const fluxion::shape& s) : m_shape(s) {
    const index_t n = s.size();
    m_buffer = detail::buffer_ref::allocate<Device>(static_cast<std::size_t>(n) * sizeof(T));
    m_data = static_cast<T*>(m_buffer.data());
    m_id = detail::next_tensor_id();
  }

  /// A tensor sharing `other`'s buffer under a new shape of the same size (internal: the result
  /// of the reshape node, which the tape records; the tensor made here is a new one to autodiff).
  tensor(const tensor& other, const fluxion::shape& s, detail::same_buffer_t)
      : m_buffer(other.m_buffer), m_data(other.m_data), m_shape(s), m_id(detail::next_tensor_id()) {
    if (s.size() != other.size())
      throw shape_error("reshape: cannot reshape a tensor of shape " + to_string(other.shape()) + " (" +
                        std::to_string(other.size()) + " elements) into shape " + to_string(s));
  }
  /// Refused: a tensor made from another under a new shape would be a new tensor to the tape, so
  /// a gradient would silently stop at it (until stop 59 this constructor existed).
  template <class S>
    requires std::is_convertible_v<const S&, fluxion::shape>
  tensor(const tensor&, const S&) {
    static_assert(sizeof(S) == 0,
                  "fluxion::tensor(t, shape) is not a reshape the tape can see; write fluxion::reshape(t, {dims...})");
  }
  template <class Int = index_t>
  tensor(const tensor&, std::initializer_list<Int>) {
    static_assert(sizeof(Int) == 0,
                  "fluxion::tensor(t, {dims...}) is not a reshape the tape can see; write fluxion::reshape(t, {dims...})");
  }

  const fluxion::shape& shape() const noexcept { return m_shape; }
  int rank() const noexcept { return m_shape.rank(); }
  index_t size() const noexcept { return m_shape.size(); }
  bool empty() const noexcept { return size() == 0; }

  /// The truth value of a one-element tensor; any other size throws (use fluxion::all or any).
  explicit operator bool() const { return detail::truth_value(*this); }

  /// Pointer to the elements, on Device.
  const T* data() const noexcept { return m_data; }
  /// Kernels write their output here before anyone else sees the tensor.
  T* mutable_data() noexcept { return m_data; }

  /// The tensor itself: materialization of a tensor is free.
  const tensor& eval() const noexcept { return *this; }

  std::vector<T> to_vector() const {
    std::vector<T> v(static_cast<std::size_t>(size()));
    if constexpr (std::is_same_v<T, bool>) {
      auto tmp = std::make_unique<bool[]>(v.size());
      detail::device_memory<Device>::to_host(tmp.get(), m_data, size());
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = tmp[i];
    } else {
      detail::device_memory<Device>::to_host(v.data(), m_data, size());
    }
    return v;
  }

  /// The single value of a tensor with one element.
  T item() const {
    if (size() != 1)
      throw invalid_argument("item: tensor of shape " + to_string(m_shape) + " has " + std::to_string(size()) +
                             " elements, not 1");
    return read(0);
  }

  /// Element access with bounds checks; negative indices count from the end.
  template <class... I>
    requires(std::is_integral_v<I> && ...)
  T operator()(I... idx) const {
    const index_t list[] = {static_cast<index_t>(idx)..., 0};
    return read(flat_index(list, static_cast<int>(sizeof...(I))));
  }
  T at(std::initializer_list<index_t> idx) const {
    return read(flat_index(idx.begin(), static_cast<int>(idx.size())));
  }

  detail::leaf_view<T> make_view() const {
    detail::leaf_view<T> v;
    v.data = m_data;
    v.rank = m_shape.rank();
    index_t acc = 1;
    for (int d = v.rank - 1; d >= 0; --d) {
      const index_t e = m_shape[d];
      v.strides[d] = e == 1 ? 0 : acc;
      acc *= e;
    }
    return v;
  }

  /// Identity of this tensor value; copies share it, reshapes get their own.
  std::uint64_t id() const noexcept { return m_id; }

  /// What gradient_tape::gradient returns for a source the target does not depend on
  /// (TensorFlow's None): shape (0,), no elements, printed as `none`. Using it as an operand throws
  /// an fx::invalid_argument naming the op, so that `w - lr * g` cannot silently give an empty
  /// tensor where g is none. Copies are none too; every other tensor, the empty ones included, is not.
  static tensor none() {
    tensor t;
    t.m_id = detail::none_tensor_id;
    return t;
  }
  bool is_none() const noexcept { return m_id == detail::none_tensor_id; }
  /// Identity of the storage: tensors sharing a buffer (reshapes) share it.
  const void* storage_id() const noexcept { return m_buffer.data(); }
  std::int64_t use_count() const noexcept { return m_buffer.use_count(); }

 private:

  T read(index_t flat) const {
    T v;
    if constexpr (std::is_same_v<T, bool>) {
      bool b;
      detail::device_memory<Device>::to_host(&b, m_data + flat, 1);
      v = b;
    } else {
      detail::device_memory<Device>::to_host(&v, m_data + flat, 1);
    }
    return v;
  }

  index_t flat_index(const index_t* idx, int n) const {
    if (n != rank())
      throw invalid_argument("tensor: " + std::to_string(n) + " indices given for a tensor of rank " +
                             std::to_string(rank()) + " and shape " + to_string(m_shape));
    index_t flat = 0;
    for (int d = 0; d < n; ++d) {
      index_t i = idx[d];
      const index_t ext = m_shape[d];
      if (i < -ext || i >= ext)
        throw out_of_range("tensor: index " + std::to_string(i) + " is out of range for axis " + std::to_string(d) +
                           " with size " + std::to_string(ext));
      if (i < 0) i += ext;
      flat = flat * ext + i;
    }
    return flat;
  }

  using nested = detail::nested_values<T>;
  static void nested_shape(std::initializer_list<nested> l, fluxion::shape& s, int depth) {
    if (s.rank() == depth) s.push_back(static_cast<index_t>(l.size()));
    else if (s[depth] != static_cast<index_t>(l.size()))
      throw shape_error("tensor: nested initializer lists are ragged: axis " + std::to_string(depth) +
                        " has lengths " + std::to_string(s[depth]) + " and " + std::to_string(l.size()));
    bool values = false, lists = false;
    for (const auto& x : l) (x.is_value ? values : lists) = true;
    if (values && lists)
      throw shape_error("tensor: nested initializer lists mix values and lists at depth " + std::to_string(depth));
    if (lists) {
      for (const auto& x : l) nested_shape(x.list, s, depth + 1);
    } else if (s.rank() > depth + 1) {
      throw shape_error("tensor: nested initializer lists are ragged: values at depth " + std::to_string(depth) +
                        " where other entries nest deeper");
    }
  }
  // The shape comes from the first list met at each depth; this pass checks every list against it,
  // so {{1, 2}, {{3}, {4}}} is refused whichever branch comes first.
  static void nested_fill(std::initializer_list<nested> l, const fluxion::shape& s, int depth, std::vector<T>& out) {
    if (static_cast<index_t>(l.size()) != s[depth])
      throw shape_error("tensor: nested initializer lists are ragged: axis " + std::to_string(depth) +
                        " has lengths " + std::to_string(s[depth]) + " and " + std::to_string(l.size()));
    for (const auto& x : l) {
      if (x.is_value != (depth == s.rank() - 1))
        throw shape_error("tensor: nested initializer lists are ragged: " +
                          std::string(x.is_value ? "a value" : "a list") + " at depth " + std::to_string(depth) +
                          " of a tensor of shape " + to_string(s));
      if (x.is_value) out.push_back(x.value);
      else nested_fill(x.list, s, depth + 1, out);
    }
  }
  void from_nested(std::initializer_list<nested> l) {
    fluxion::shape s;
    nested_shape(l, s, 0);
    std::vector<T> values;
    values.reserve(static_cast<std::size_t>(s.size()));
    if (l.size() > 0) nested_fill(l, s, 0, values);
    *this = tensor(s);
    if constexpr (std::is_same_v<T, bool>) {
      auto tmp = std::make_unique<bool[]>(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) tmp[i] = values[i];
      detail::device_memory<Device>::to_device(m_data, tmp.get(), s.size());
    } else {
      detail::device_memory<Device>::to_device(m_data, values.data(), s.size());
    }
  }

  detail::buffer_ref m_buffer;
  T* m_data = nullptr;
  fluxion::shape m_shape;
  std::uint64_t m_id = 0;
};

namespace detail {

/// A tensor's values on the host: the tensor itself on the cpu, else a copy (which waits for the
/// device). For code that is generic over devices without the device headers (checkpoints,
/// datasets); users call fx::to<fx::cpu>.
template <class T, class Device>
tensor<T> host_copy(const tensor<T, Device>& t) {
  if constexpr (std::is_same_v<Device, cpu>) {
    return t;
  } else {
    tensor<T> out(t.shape());
    device_memory<Device>::to_host(out.mutable_data(), t.data(), t.size());
    return out;
  }
}

/// Host values as a tensor on Device: the tensor itself for the cpu.
template <class Device, class T>
tensor<T, Device> device_copy(const tensor<T>& t) {
  if constexpr (std::is_same_v<Device, cpu>) {
    return t;
  } else {
    tensor<T, Device> out(t.shape());
    device_memory<Device>::to_device(out.mutable_data(), t.data(), t.size());
    return out;
  }
}

}  // namespace detail
}  // namespace fluxion
