// The model layer's common parts: static per-example shapes, layer names, variable collection, and
// the base of composite models.
//
//   struct two_heads : fx::nn::model<two_heads> {
//     fx::nn::sequential_t<fx::nn::input<784>, fx::nn::dense<128>, fx::nn::relu> trunk;
//     fx::nn::dense<10> classes;
//     fx::nn::dense<1> score;
//     FLUXION_LAYERS(trunk, classes, score)            // the one place that lists the sublayers
//     auto call(const fx::tensor<float>& x, bool training) {
//       fx::tensor<float> h = trunk(x, training);
//       return std::pair{classes(h), score(h)};
//     }
//   };
//   two_heads net;
//   auto vars = net.trainable_variables();             // trunk/dense/kernel, ..., classes/kernel, ...
//
// Principle 6: what a model's definition fixes (units, kernel sizes, per-example shapes) is a
// template argument, checked when the program compiles; the batch size is a run-time value.
// Variables get hierarchical names from where they sit in the model (`trunk/dense/kernel`); the
// names are stable, so checkpoints and optimizer slots can key on them.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../tensor.hpp"
#include "../tensor/creation.hpp"
#include "../tensor/random.hpp"
#include "constraints.hpp"
#include "initializers.hpp"
#include "regularizers.hpp"

namespace fluxion::nn {

/// A layer's name as its constructor's argument: a template, so that a braced list of options
/// ({.use_bias = false, .name = "fc"}) is never taken for a string.
template <class S>
concept layer_name = std::is_convertible_v<S, std::string>;

/// Keras's arguments of Dense and the convolutions beyond their shapes, as designated initializers:
///
///   fx::nn::dense<64>{{.kernel_initializer = fx::nn::initializers::he_normal(),
///                      .kernel_regularizer = fx::nn::regularizers::l2(1e-4)}}
///   fx::nn::conv2d<32, 3, fx::nn::same>{{.use_bias = false}}   // before a batch_norm
///
/// use_bias = false: the layer has no bias variable (its summary and checkpoints have none, bias()
/// throws); its statement adds a constant zero bias, which is not a variable and gets no gradient.
/// The regularizers are the variables' (variable::regularizer()); the model's regularization_loss()
/// sums them and fx::fit adds it to the loss. The constraints are the variables' too
/// (variable::constraint()); the optimizers apply them after each update. Keras's activity
/// regularizer is the layer nn::activity_regularization, put after the layer (and its activation).
struct layer_options {
  bool use_bias = true;
  initializer kernel_initializer = initializers::glorot_uniform();
  initializer bias_initializer = initializers::zeros();
  regularizer kernel_regularizer = {};
  regularizer bias_regularizer = {};
  constraint kernel_constraint = {};
  constraint bias_constraint = {};
  std::string name = {};
};

/// A per-example shape known at compile time (the batch axis is not part of it).
template <index_t... Dims>
struct static_shape {
  static constexpr int rank = static_cast<int>(sizeof...(Dims));
  static constexpr std::array<index_t, sizeof...(Dims)> dims{Dims...};
  static constexpr index_t size = (index_t(1) * ... * Dims);
  /// The run-time shape of a batch of `batch` examples.
  static fluxion::shape batched(index_t batch) { return fluxion::shape{batch, Dims...}; }
  static std::string text() {
    std::string s = "(batch";
    ((s += ", " + std::to_string(Dims)), ...);
    return s + ")";
  }
};

template <class S>
inline constexpr bool is_static_shape_v = false;
template <index_t... D>
inline constexpr bool is_static_shape_v<static_shape<D...>> = true;

/// The model's input: its per-example shape, element type and device. As the first argument of
/// `sequential`, it fixes every later shape, and the element type and device of every layer's
/// variables; later in a sequential it asserts the shape there. `input<784>` is float on the cpu,
/// `typed_input<double, 784>` double, `input<784>::on<fx::cuda>` float on the GPU.
template <class Device, class T, index_t... Dims>
struct device_input {
  using value_type = T;
  using device_type = Device;
  using shape_type = static_shape<Dims...>;
  template <class D>
  using on = device_input<D, T, Dims...>;
  static_assert(sizeof...(Dims) > 0, "fluxion::nn::input: give the per-example shape, e.g. input<28, 28, 1>.");
  static_assert(((Dims > 0) && ...), "fluxion::nn::input: every extent must be positive.");
};
template <class T, index_t... Dims>
using typed_input = device_input<cpu, T, Dims...>;
template <index_t... Dims>
using input = typed_input<float, Dims...>;

namespace detail {

/// How many neighbouring positions of `channels` values a normalization's statements take as one
/// row: the largest divisor of `positions` with at most 512 values a row (1 when none is, as for a
/// prime count). A statement pays for each row, so per-channel operands read over rows of one
/// position's channels cost more than the values (batch_norm, group_norm).
inline index_t row_tile(index_t positions, index_t channels) {
  for (index_t k = std::min<index_t>(positions, 512 / std::max<index_t>(1, channels)); k > 1; --k)
    if (positions % k == 0) return k;
  return 1;
}

/// The epilogue that leaves a layer's output as it is.
struct identity {
  template <class X>
  X&& operator()(X&& x) const noexcept {
    return std::forward<X>(x);
  }
};

/// Whether a layer's Epilogue (the activation fused into its statement) is one that the GEMM and
/// convolution kernels apply as they store their output (none, or relu: activations.hpp
/// specializes it). Layers use the kernel's epilogue only while no tape or forward accumulator is
/// alive on the thread (inference): nothing then records the statement, and bias and activation
/// cost no pass of their own over the output. The numbers are the same, bitwise: the kernel adds
/// the bias to the same sum and applies the same max(x, 0).
template <class Epilogue>
struct kernel_epilogue {
  static constexpr bool fusable = false;
};
template <>
struct kernel_epilogue<identity> {
  static constexpr bool fusable = true;
  static constexpr auto activation = fluxion::detail::kernels::activation::none;
};
/// Whether the Epilogue is nn::relu (a layer's kernel may then apply it itself: batch_norm's and
/// group_norm's on the cpu).
template <class Epilogue>
constexpr bool is_relu_epilogue() {
  if constexpr (kernel_epilogue<Epilogue>::fusable)
    return kernel_epilogue<Epilogue>::activation == fluxion::detail::kernels::activation::relu;
  else
    return false;
}

/// Layer R re-declared from `layer` (another element type or device): from the layer itself where
/// R can be (keeping settings such as batch_norm's momentum), else by its name.
template <class R, class L>
R rebuilt(const L& layer) {
  if constexpr (std::is_constructible_v<R, const L&>) return R(layer);
  else return R(layer.name());
}

/// True while nothing records statements on this thread: no gradient tape and no forward
/// accumulator is alive. The same in every translation unit whatever its autodiff settings: the
/// linker keeps one copy of it (expr/evaluate.hpp's statement_recorder).
inline bool nothing_records() noexcept { return fluxion::detail::autodiff_state::observers == 0; }

/// A string as a template argument, so that compile-time shape errors print the layer's name.
template <std::size_t N>
struct fixed_string {
  char text[N]{};
  consteval fixed_string(const char (&s)[N]) {  // NOLINT: implicit, for "dense" as an argument
    for (std::size_t i = 0; i < N; ++i) text[i] = s[i];
  }
};

/// A compile-time shape check. When Ok is false the compiler reports this instantiation, whose
/// arguments name the layer and both extents (check_extents<false, "conv2d", "input height", 3,
/// "kernel height", 5>), and the layer's own static_assert then says what to change.
/// Not under clang: clang reports only the first failed assertion of a statement, so this one would
/// hide the layer's, and clang 14 prints a fixed_string argument as its character codes
/// ({{99, 111, 110, ...}}), so the instantiation names nothing readable. There the layer's own
/// static_assert reports, with the extents in its failed requirement (check_extents<false, ..., 3,
/// ..., 5>::value).
template <bool Ok, fixed_string Layer, fixed_string Got, index_t GotExtent, fixed_string Needs, index_t NeededExtent>
struct check_extents {
#if !defined(__clang__)
  static_assert(Ok, "fluxion::nn: a layer does not fit its input's shape; the layer, the input's extent and the "
                    "extent the layer needs are the arguments of check_extents in the instantiation above.");
#endif
  static constexpr bool value = Ok;
};

/// Calls f(variable&) for each variable of a layer, naming it `prefix + local name` first.
template <class T>
using variable_visitor = std::function<void(variable<T>&)>;

/// Keras's automatic names: the first dense layer of a model is `dense`, the next `dense_1` ...
class name_counter {
 public:
  std::string next(const std::string& base) {
    auto it = m_counts.begin();
    while (it != m_counts.end() && it->first != base) ++it;
    if (it == m_counts.end()) it = m_counts.insert(it, {base, 0});
    const int n = it->second++;
    return n == 0 ? base : base + "_" + std::to_string(n);
  }

 private:
  std::vector<std::pair<std::string, int>> m_counts;  // a model has a few layer kinds: a linear search
};

/// Splits the text of FLUXION_LAYERS's arguments into member names.
inline std::vector<std::string> split_names(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ' && c != '\n' && c != '\t') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

template <class... L>
auto named_layers(const char* text, L&... layers) {
  return std::pair{split_names(text), std::tie(layers...)};
}

/// The trailing per-example shape of x must be S (any batch size): the run-time half of principle 6.
template <class S>
void check_batch_shape(const char* op, const std::string& name, const fluxion::shape& s) {
  bool ok = s.rank() == S::rank + 1;
  for (int d = 0; ok && d < S::rank; ++d) ok = s[d + 1] == S::dims[static_cast<std::size_t>(d)];
  if (!ok)
    throw shape_error(std::string(op) + ": '" + name + "' expects input of shape " + S::text() + ", got " +
                      to_string(s));
}

/// Model summaries (sequential and composite): a header, then a row per layer with its name
/// (indented two spaces per level of nesting), its per-example output shape where it is known,
/// and its trainable parameters.
inline constexpr const char* summary_header = "layer                      output shape          params\n";
inline void summary_row(std::string& out, int depth, std::string name, std::string shape, index_t params) {
  name.insert(0, static_cast<std::size_t>(2 * depth), ' ');
  name.resize(std::max<std::size_t>(name.size() + 1, 27), ' ');
  shape.resize(std::max<std::size_t>(shape.size() + 1, 22), ' ');
  out += name + shape + std::to_string(params) + "\n";
}
template <class T, class Device, class L>
index_t trainable_params(L& layer) {
  index_t n = 0;
  layer.for_each_variable("", [&](variable<T, Device>& v) {
    if (v.trainable()) n += v.size();
  });
  return n;
}
/// Models whose summary lists their own layers below their row.
template <class L>
concept nested_summary = requires(L& l, std::string& out) { l.summary_rows(out, 0); };
/// Layers that make their variables on their first call (dense, conv2d ... outside a sequential).
template <class L>
concept built_on_first_call = requires(const L& l) { l.built(); };

/// A weight of shape s on Device from `init`: zeros and uniform values made there (the same values
/// as on the host), any other drawn on the host and copied.
template <class T, class Device>
tensor<T, Device> draw_weight(const initializer& init, const fluxion::shape& s, random::generator& gen) {
  if (init.which() == initializer::kind::zeros) return zeros<T, Device>(s);
  if (init.which() == initializer::kind::random_uniform)
    return random::uniform<T, Device>(s, gen, static_cast<T>(init.first()), static_cast<T>(init.second()));
  return fluxion::detail::device_copy<Device>(init.template operator()<T>(s, gen));
}

/// Throws unless penalty `r`, a layer's option `what`, is finite and not negative: when the layer is
/// made, before anything is built.
inline void check_regularizer(const std::string& layer, const char* what, const regularizer& r) {
  for (const auto& [term, v] : {std::pair{"l1", r.l1}, std::pair{"l2", r.l2}})
    if (!(v >= 0) || !std::isfinite(v))
      throw invalid_argument(layer + ": " + what + "." + term + " = " + fluxion::detail::value_text(v) +
                             " must be finite and not negative");
}
/// `kernel` names the kernel's options in the messages: "depthwise" for depthwise_conv2d's, whose
/// options (depthwise_conv2d_options) carry Keras's names.
inline void check_layer_options(const char* layer, const std::string& name, const layer_options& o,
                                const char* kernel = "kernel") {
  const std::string text = std::string(layer) + " '" + name + "'";
  check_regularizer(text, (std::string(kernel) + "_regularizer").c_str(), o.kernel_regularizer);
  check_regularizer(text, "bias_regularizer", o.bias_regularizer);
  if (!o.use_bias && o.bias_regularizer)
    throw invalid_argument(text + ": a bias_regularizer with use_bias = false has no bias to act on");
  if (!o.use_bias && o.bias_constraint)
    throw invalid_argument(text + ": a bias_constraint with use_bias = false has no bias to act on");
}

/// The checks of a normalization layer's options (batch_norm_options, layer_norm_options) when the
/// layer is made: epsilon positive, the penalties finite and not negative, none on a gamma or beta
/// that scale = false or center = false leaves out. `layer` names it ("batch_norm 'bn'").
template <class Options>
void check_norm_options(const std::string& layer, const Options& o) {
  if (!(o.epsilon > 0.0) || !std::isfinite(o.epsilon))
    throw invalid_argument(layer + ": epsilon = " + fluxion::detail::value_text(o.epsilon) + " is not positive and finite");
  check_regularizer(layer, "gamma_regularizer", o.gamma_regularizer);
  check_regularizer(layer, "beta_regularizer", o.beta_regularizer);
  auto absent = [&](bool present, const char* flag, const char* what, bool r, bool c) {
    if (present) return;
    if (r) throw invalid_argument(layer + ": a " + what + "_regularizer with " + flag + " = false has no " + what + " to act on");
    if (c) throw invalid_argument(layer + ": a " + what + "_constraint with " + flag + " = false has no " + what + " to act on");
  };
  absent(o.scale, "scale", "gamma", bool(o.gamma_regularizer), bool(o.gamma_constraint));
  absent(o.center, "center", "beta", bool(o.beta_regularizer), bool(o.beta_constraint));
}
/// gamma()'s and beta()'s check: a normalization layer made with scale or center false has none.
inline void require_norm_variable(bool present, const std::string& layer, const char* what, const char* flag) {
  if (!present)
    throw invalid_argument(layer + ": the layer has no " + what + " (it was made with " + flag + " = false)");
}

/// Runs make(), a layer's build, which emplaces the variables `vars`; if it throws (a constraint's
/// axis the variable does not have), the layer is left unbuilt, as before the call.
template <class Make, class... V>
void built_or_none_impl(Make&& make, V&... vars) {
  try {
    make();
  } catch (...) {
    (vars.reset(), ...);
    throw;
  }
}
template <class A, class Make>
void built_or_none(A& a, Make&& make) { built_or_none_impl(make, a); }
template <class A, class B, class Make>
void built_or_none(A& a, B& b, Make&& make) { built_or_none_impl(make, a, b); }
template <class A, class B, class C, class Make>
void built_or_none(A& a, B& b, C& c, Make&& make) { built_or_none_impl(make, a, b, c); }
template <class A, class B, class C, class D, class Make>
void built_or_none(A& a, B& b, C& c, D& d, Make&& make) { built_or_none_impl(make, a, b, c, d); }

/// Gives v its penalty and constraint (Keras's add_weight(regularizer=, constraint=)).
template <class T, class Device>
void attach(variable<T, Device>& v, const regularizer& r, const constraint& c) {
  v.set_regularizer(r);
  v.set_constraint(c);
}

/// A normalization layer's gamma and beta of n channels (batch_norm_options, layer_norm_options):
/// drawn from the options' initializers, or ones and zeros where scale or center is false (constants
/// the statement reads, not trainable); then made variables named `name/gamma` and `name/beta`, with
/// the options' penalties and constraints on those the layer has.
template <class T, class Device, class Options>
std::pair<tensor<T, Device>, tensor<T, Device>> initial_gamma_beta(const Options& o, index_t n, random::generator& gen) {
  const fluxion::shape s{n};
  return {o.scale ? draw_weight<T, Device>(o.gamma_initializer, s, gen) : ones<T, Device>(s),
          o.center ? draw_weight<T, Device>(o.beta_initializer, s, gen) : zeros<T, Device>(s)};
}
template <class T, class Device, class Options>
void emplace_gamma_beta(std::optional<variable<T, Device>>& gamma, std::optional<variable<T, Device>>& beta,
                        std::pair<tensor<T, Device>, tensor<T, Device>> values, const std::string& name,
                        const Options& o) {
  gamma.emplace(std::move(values.first), name + "/gamma", o.scale);
  beta.emplace(std::move(values.second), name + "/beta", o.center);
  if (o.scale) attach(*gamma, o.gamma_regularizer, o.gamma_constraint);
  if (o.center) attach(*beta, o.beta_regularizer, o.beta_constraint);
}

/// bias()'s check: a layer made with use_bias = false has none.
inline void require_bias(const layer_options& o, const char* layer, const std::string& name) {
  if (!o.use_bias)
    throw invalid_argument(std::string(layer) + " '" + name + "': the layer has no bias (it was made with use_bias = false)");
}

/// Keras's mask of a sequence: (batch, time) of the (batch, time, ...) input, or a shape_error
/// naming `layer` ("lstm 'encoder'") and both shapes. `time` names the axis as the layer does.
inline void check_sequence_mask(const std::string& layer, const fluxion::shape& mask, const fluxion::shape& input,
                                const char* time = "time") {
  if (mask != fluxion::shape{input[0], input[1]})
    throw shape_error(layer + ": the mask must be (batch, " + time + ") = (" + std::to_string(input[0]) + ", " +
                      std::to_string(input[1]) + ") for input " + to_string(input) + ", got " + to_string(mask));
}

}  // namespace detail

/// A model's output with Keras's mask on it (output._keras_mask): what
/// sequential::output_and_mask gives when an embedding<...>::mask_zero's or masking's mask
/// reaches the output (a sequence tagger), and what fx::fit and fx::evaluate hand the loss (Keras
/// weights the loss by it). A composite model may define output_and_mask(x, training) returning it.
template <class T, class Device = cpu>
struct masked_output {
  tensor<T, Device> output;
  tensor<bool, Device> mask;  // (batch, time): false at the padding
};

namespace detail {
inline thread_local int recompute_depth = 0;
}  // namespace detail

/// While alive, layers run again only to rebuild values for a backward pass (reversible blocks,
/// gradient checkpointing): batch normalization then does not update its moving statistics a
/// second time in the same step.
class recompute_scope {
 public:
  recompute_scope() noexcept { ++detail::recompute_depth; }
  ~recompute_scope() { --detail::recompute_depth; }
  recompute_scope(const recompute_scope&) = delete;
  recompute_scope& operator=(const recompute_scope&) = delete;
  /// Whether this thread is inside a recompute_scope.
  static bool active() noexcept { return detail::recompute_depth > 0; }
};

template <class L>
concept device_generic_layer = requires { requires L::device_generic; };

/// Mixin of every layer and model: the variable lists of Keras, from Derived's
/// `for_each_variable(prefix, visitor)`. Device is where the variables live (and the layer runs).
template <class Derived, class T, class Device = cpu>
class layer_base {
  // A newcomer's Keras habit, Dense(16, activation="relu"), written nn::dense<16, nn::relu>: said
  // here, before the variables' own "tensor<T>: T must be float, ..." (stop 58).
  static_assert(is_element_type_v<T>,
                "fluxion::nn: a layer's second template argument is its element type (float or double), not an "
                "activation; put the activation after the layer as a layer of its own: nn::dense<16>{}, nn::relu{}.");

 public:
  using value_type = T;
  using device_type = Device;

  /// The layer's own name (Keras's automatic one, `dense`, `conv2d_1` ..., unless given).
  const std::string& name() const noexcept { return m_name; }
  void set_name(std::string n) { m_name = std::move(n); }

  /// Every variable, trainable or not, in a stable order, named by its place in the model.
  std::vector<variable<T, Device>*> variables() { return collect(0); }
  std::vector<variable<T, Device>*> trainable_variables() { return collect(1); }
  std::vector<variable<T, Device>*> non_trainable_variables() { return collect(2); }
  /// Keras's `sum(model.losses)`: the penalties of the trainable variables (a layer's
  /// kernel_regularizer and bias_regularizer, variable::set_regularizer) and the losses the layers
  /// added during the model's last call (added_losses()), a scalar that a tape differentiates; 0
  /// when there are none. fx::fit, fx::evaluate and nn::compile_step add both to the loss.
  ///
  /// Call the model in a statement before the one that reads this: C++ evaluates the operands of
  /// `loss_fn(net(x, true), y) + net.regularization_loss()` in either order, and g++ reads the
  /// second first, which would add the previous call's losses. Under a gradient tape that mistake
  /// throws (the losses were added under no tape that records now); before the first call and
  /// without a tape it cannot be told.
  tensor<T, Device> regularization_loss() {
    if (!m_added_losses.empty() && !fluxion::detail::tape_stack::tapes.empty()) {
      bool recording = false, same = false;
      for (const gradient_tape* t : fluxion::detail::tape_stack::tapes)
        if (t->recording()) {
          recording = true;
          same = same || t->serial() == m_added_under;
        }
      if (recording && !same)
        throw error("'" + m_name + "'.regularization_loss(): the losses its layers added (nn::add_loss, "
                    "activity_regularization) come from a call made before the gradient tape that records now "
                    "started, so they would add no gradient; call the model in a statement of its own first "
                    "(fx::tensor<float> y = net(x, true); loss = loss_fn(y, labels) + net.regularization_loss();): "
                    "C++ evaluates the operands of + in either order");
    }
    return detail::plus_losses(nn::regularization_loss(trainable_variables()), m_added_losses);
  }
  /// Keras's model.losses without the penalties: what the layers added with nn::add_loss
  /// (nn::activity_regularization's penalty) during the model's last call, each one value;
  /// empty before the first call and for a layer that is not a model.
  const std::vector<tensor<T, Device>>& added_losses() const noexcept { return m_added_losses; }
  /// f() as a call of this model: what the layers add with nn::add_loss while it runs becomes
  /// added_losses() and goes on to the scope around it (sequential and model calls run in it, and
  /// fx::fit runs a composite model's own output_and_mask in it).
  template <class F>
  decltype(auto) collecting_losses(F&& f) {
    m_added_under = 0;
    for (auto it = fluxion::detail::tape_stack::tapes.rbegin(); it != fluxion::detail::tape_stack::tapes.rend(); ++it)
      if ((*it)->recording()) {
        m_added_under = (*it)->serial();
        break;
      }
    m_added_losses.clear();
    loss_scope<T, Device> scope;
    auto keep = [&] {  // after the call, and only if it returns
      if (scope.empty()) return;
      m_added_losses = scope.losses();
      if (std::vector<tensor<T, Device>>* outer = scope.outer())
        outer->insert(outer->end(), m_added_losses.begin(), m_added_losses.end());
    };
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      keep();
    } else {
      decltype(auto) out = f();
      keep();
      return out;
    }
  }
  /// The number of scalars in the trainable variables.
  index_t count_params() {
    index_t n = 0;
    for (auto* v : trainable_variables()) n += v->size();
    return n;
  }

 protected:
  explicit layer_base(std::string n = {}) : m_name(std::move(n)) {}

  /// summary()'s closing lines: the trainable parameters, then the non-trainable ones where there
  /// are any (batch_norm's moving statistics, a frozen layer's weights: Keras's "Non-trainable
  /// params"), so that the table accounts for every scalar a checkpoint holds.
  std::string summary_totals() {
    std::string out = "total trainable parameters: " + std::to_string(count_params()) + "\n";
    index_t fixed = 0;
    for (auto* v : non_trainable_variables()) fixed += v->size();
    if (fixed > 0) out += "non-trainable parameters: " + std::to_string(fixed) + "\n";
    return out;
  }

  /// A variable of the layer once it is built; before, an error that names the layer.
  variable<T, Device>& require_built(std::optional<variable<T, Device>>& v, const char* op, const char* what) {
    if (!v)
      throw error(std::string(op) + " '" + m_name + "': " + what +
                  " does not exist before the layer is built (call it once)");
    return *v;
  }
  /// Names v `prefix + local` and hands it to f; nothing before the layer is built.
  template <class F>
  static void visit(const std::string& prefix, F& f, std::optional<variable<T, Device>>& v, const char* local) {
    if (!v) return;
    v->set_name(prefix + local);
    f(*v);
  }
  /// The prefix of this layer's variables when it is the root of a collection: a layer alone names
  /// its variables `dense/kernel`; a model names them by its sublayers.
  std::string root_prefix() const { return Derived::names_itself ? m_name + "/" : std::string{}; }
  std::string m_name;
  std::vector<tensor<T, Device>> m_added_losses;  // added_losses(): the last call's
  std::uint64_t m_added_under = 0;                 // the serial of the tape that recorded that call, or 0

 private:
  std::vector<variable<T, Device>*> collect(int which) {
    std::vector<variable<T, Device>*> out;
    static_cast<Derived*>(this)->for_each_variable(root_prefix(), [&](variable<T, Device>& v) {
      if (which == 0 || (which == 1) == v.trainable()) out.push_back(&v);
    });
    return out;
  }
};

namespace detail {

/// What layer_norm and group_norm share: Keras's options (Options: epsilon, center, scale, the two
/// initializers, gamma's and beta's regularizers and constraints, name), checked when the layer is
/// made, and gamma and beta over the input's last axis, drawn when it is built. `Layer` names the
/// layer in messages ("layer_norm"). A layer made with center or scale false keeps a constant beta
/// or gamma that no visitor, checkpoint or optimizer sees.
template <class Derived, class T, class Device, class Options>
class affine_norm : public layer_base<Derived, T, Device> {
  using base = layer_base<Derived, T, Device>;

 public:
  double epsilon() const noexcept { return m_options.epsilon; }
  /// The options the layer was made with, under its current name.
  Options options() const {
    Options o = m_options;
    o.name = this->m_name;
    return o;
  }
  bool built() const noexcept { return m_gamma.has_value(); }
  /// Draws new initial values (the same shapes and variables).
  void initialize(random::generator& gen) {
    if (!built()) return;
    auto [gamma, beta] = initial_gamma_beta<T, Device>(m_options, m_channels, gen);
    m_gamma->assign(gamma);
    m_beta->assign(beta);
  }
  variable<T, Device>& gamma() {
    require_norm_variable(m_options.scale, text(), "gamma", "scale");
    return this->require_built(m_gamma, Derived::layer_text, "gamma");
  }
  variable<T, Device>& beta() {
    const char* flag = "center";
    if constexpr (requires { m_options.rms_scaling; })
      if (m_options.rms_scaling) flag = "rms_scaling = true, so center";
    require_norm_variable(m_options.center, text(), "beta", flag);
    return this->require_built(m_beta, Derived::layer_text, "beta");
  }
  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    if (m_options.scale) this->visit(prefix, f, m_gamma, "gamma");
    if (m_options.center) this->visit(prefix, f, m_beta, "beta");
  }

 protected:
  /// `adjust` may change the options before they are checked (layer_norm's rms_scaling).
  template <class Adjust>
  affine_norm(Options options, Adjust adjust)
      : base(options.name.empty() ? Derived::base_name : options.name), m_options(std::move(options)) {
    adjust(m_options);
    check_norm_options(text(), m_options);
  }
  /// "layer_norm 'ln'", as messages name the layer.
  std::string text() const { return std::string(Derived::layer_text) + " '" + this->m_name + "'"; }
  /// The input as a tensor, after the checks both layers make: built from its last axis on the
  /// first call, then that axis must match (`what` names it in the message: "features").
  template <class E>
  tensor<T, Device> checked_input(const E& e, const char* what) {
    const fluxion::shape& s = e.shape();
    if (!built() && s.rank() >= 2) static_cast<Derived*>(this)->build(fluxion::shape{s[s.rank() - 1]});
    if (s.rank() < 2 || s[s.rank() - 1] != m_channels)
      throw shape_error(text() + ": expects input of shape (batch, ..., " +
                        (built() ? std::to_string(m_channels) : std::string(what)) + "), got " + to_string(s));
    return fluxion::detail::materialize_asserted<T, Device>(e);
  }
  /// Creates gamma and beta of `channels` (the layer is left unbuilt if that throws).
  void build_gamma_beta(index_t channels, random::generator& gen) {
    m_channels = channels;
    built_or_none(m_gamma, m_beta, [&] {
      emplace_gamma_beta(m_gamma, m_beta, initial_gamma_beta<T, Device>(m_options, channels, gen), this->m_name,
                         m_options);
    });
  }

  Options m_options;
  index_t m_channels = 0;
  std::optional<variable<T, Device>> m_gamma, m_beta;
};

}  // namespace detail

/// Base of layers without variables (activations, pooling, reshaping): a name, no variables,
/// the same element type whatever the model's.
template <class Derived>
class stateless_layer {
 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = false;  // layers that also run on fx::cuda say so
  template <class U, class D = cpu>
  using rebind = Derived;

  const std::string& name() const noexcept { return m_name; }
  void set_name(std::string n) { m_name = std::move(n); }
  template <class F>
  void for_each_variable(const std::string&, F&&) {}
  void initialize(random::generator&) {}

 protected:
  explicit stateless_layer(std::string n) : m_name(std::move(n)) {}
  std::string m_name;
};

/// Base of composite models, as Keras's `Model` subclasses: list the sublayers once with
/// FLUXION_LAYERS(a, b, ...), define `call(x, training)`, and the variable lists, names and
/// `operator()` follow. A member of the list may also be a variable of the model's element type and
/// device (Keras's add_weight), named by its member name:
///
///   struct tempered : fx::nn::model<tempered> {
///     fx::nn::dense<10> head;
///     fx::variable<float> temperature{fx::tensor<float>(1.f)};
///     FLUXION_LAYERS(head, temperature)                // head/kernel, head/bias, temperature
///     auto call(const fx::tensor<float>& x, bool) { return fx::tensor<float>(head(x) / temperature); }
///   };
template <class Derived, class T = float, class Device = cpu>
class model : public layer_base<Derived, T, Device> {
 public:
  static constexpr bool names_itself = false;
  static constexpr bool device_generic = true;  // its sublayers say whether they are

  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    name_members();
    return this->collecting_losses([&]() -> decltype(auto) { return static_cast<Derived&>(*this).call(std::forward<Args>(args)...); });
  }

  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    auto [names_, refs] = static_cast<Derived&>(*this).sublayers();
    const auto& names = names_;  // clang before 16 cannot capture a structured binding
    std::size_t i = 0;
    std::apply([&](auto&... member) { (visit_member(prefix + names[i++], member, f), ...); }, refs);
  }

  /// A table of the members, as Keras's summary() of a subclassed model: each member of
  /// FLUXION_LAYERS by name and kind, its per-example output shape where the type says it, and its
  /// trainable parameters; the layers of a member that is a model (sequential or composite) are
  /// indented below it. A layer built on its first call (a dense or conv2d member) has no variables
  /// before the model's first call, and its row says "not built" until then.
  /// Returned, not printed (Keras's summary() prints): `std::cout << net.summary();`.
  [[nodiscard("summary() returns the table; print it: std::cout << net.summary()")]] std::string summary() {
    std::string out = detail::summary_header;
    summary_rows(out, 0);
    out += this->summary_totals();
    if (out.find(" not built ") != std::string::npos)
      out += "(call the model once to build the layers marked 'not built' and count their parameters)\n";
    return out;
  }
  /// summary()'s rows, indented by depth.
  void summary_rows(std::string& out, int depth) {
    auto [names_, refs] = static_cast<Derived&>(*this).sublayers();
    const auto& names = names_;  // clang before 16 cannot capture a structured binding
    std::size_t i = 0;
    std::apply([&](auto&... member) { (summary_member(out, depth, names[i++], member), ...); }, refs);
  }

 private:
  /// On the first call: each member layer still under its automatic name (its kind, `lstm`) takes
  /// its member name, so that its errors say which member (`lstm 'decoder': ...`), as a sequential
  /// model numbers its layers (`lstm_1`). A name given to the layer is kept.
  void name_members() {
    if (m_members_named) return;
    m_members_named = true;
    auto [names_, refs] = static_cast<Derived&>(*this).sublayers();
    const auto& names = names_;  // clang before 16 cannot capture a structured binding
    std::size_t i = 0;
    std::apply([&](auto&... member) { (name_member(names[i++], member), ...); }, refs);
  }
  template <class M>
  static void name_member(const std::string& name, M& member) {
    if constexpr (!is_variable_v<M> && requires { M::base_name; })
      if (member.name() == M::base_name) member.set_name(name);
  }

  template <class M>
  static void summary_member(std::string& out, int depth, const std::string& name, M& member) {
    if constexpr (is_variable_v<M>) {
      detail::summary_row(out, depth, name + " (variable)", to_string(member.shape()),
                          member.trainable() ? member.size() : 0);
    } else {
      std::string shape;
      if constexpr (requires { M::output_shape_t::text(); }) shape = M::output_shape_t::text();
      if constexpr (detail::built_on_first_call<M>)
        if (!member.built()) shape = "not built";
      std::string kind = "model";
      if constexpr (requires { M::base_name; }) kind = M::base_name;
      detail::summary_row(out, depth, name + " (" + kind + ")", shape, detail::trainable_params<T, Device>(member));
      if constexpr (detail::nested_summary<M>) member.summary_rows(out, depth + 1);
    }
  }

  template <class M, class F>
  static void visit_member(const std::string& name, M& member, F& f) {
    if constexpr (is_variable_v<M>) {
      static_assert(std::is_same_v<M, variable<T, Device>>,
                    "fluxion::nn::model: a variable listed in FLUXION_LAYERS must have the model's element type and "
                    "device (fluxion::variable<T, Device> of nn::model<Self, T, Device>).");
      if constexpr (std::is_same_v<M, variable<T, Device>>) {  // else: the message above, and no other
        member.set_name(name);
        f(member);
      }
    } else {
      member.for_each_variable(name + "/", f);
    }
  }

  bool m_members_named = false;
};

}  // namespace fluxion::nn

/// Lists a composite model's sublayers (members) in one place, by name: FLUXION_LAYERS(conv1, conv2, fc).
#define FLUXION_LAYERS(...) \
  auto sublayers() { return ::fluxion::nn::detail::named_layers(#__VA_ARGS__, __VA_ARGS__); }
