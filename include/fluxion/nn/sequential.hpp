// fx::nn::sequential: a stack of layers whose shapes are checked when the program compiles.
//
//   auto net = fx::nn::sequential(fx::nn::input<28, 28, 1>{},
//                                 fx::nn::conv2d<32, 5, fx::nn::same>{}, fx::nn::relu{},
//                                 fx::nn::max_pool2d<2>{}, fx::nn::flatten{}, fx::nn::dense<10>{});
//   fx::tensor<float> logits = net(images);           // any batch size: (batch, 28, 28, 1) -> (batch, 10)
//   decltype(net)::output_shape_t::text();            // "(batch, 10)"
//   std::cout << net.summary();
//
// Every layer's per-example output shape is computed from the input's at compile time, so a layer
// that does not fit (a 5x5 valid convolution of a 3x3 input, a reshape to another element count,
// one model's output fed to a model that expects another width) is a static_assert that names the
// layer and both extents. The batch size stays a run-time value and is checked with an exception.
// The model's element type and device are the input's: fx::nn::typed_input<double, 784>{} makes a
// double model, fx::nn::input<784>::on<fx::cuda>{} a model whose variables live on the GPU and
// whose input and output are fx::cuda tensors (dense, the activations, dropout, flatten, reshape,
// layer_norm and embedding so far; another layer there is a static_assert).
//
// An activation that follows a dense or conv2d layer is fused into that layer's statement: bias and
// activation are one pass over the output.
//
// As a member of a composite model, name the type: fx::nn::sequential_t<fx::nn::input<784>,
// fx::nn::dense<128>, fx::nn::relu> trunk; (built with fx::random::global_generator()).
#pragma once

#include "module.hpp"  // first: the core (fluxion/tensor.hpp) in its order
#include <algorithm>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>


namespace fluxion::nn {

template <class T, class InShape, class Device, class... Layers>
class sequential_model;

namespace detail {

template <class L>
concept buildable = requires(L& l, const fluxion::shape& s, random::generator& g) { l.build(s, g); };
template <class L>
concept takes_epilogue = requires { requires L::takes_epilogue; };
template <class L>
concept elementwise_layer = requires { requires L::elementwise; };

template <class In, class L>
using output_shape_t = decltype(L::output_shape(In{}));

/// The per-example input shape of each layer, and the model's output shape.
template <class In, class... Ls>
struct shape_chain {
  using inputs = std::tuple<>;
  using output = In;
};
template <class In, class L, class... Ls>
struct shape_chain<In, L, Ls...> {
  using rest = shape_chain<output_shape_t<In, L>, Ls...>;
  using inputs = decltype(std::tuple_cat(std::declval<std::tuple<In>>(), std::declval<typename rest::inputs>()));
  using output = typename rest::output;
};

template <class S>
fluxion::shape runtime_shape() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return fluxion::shape{S::dims[I]...};
  }(std::make_index_sequence<static_cast<std::size_t>(S::rank)>{});
}

/// A model used as a layer must get the input shape it was defined for.
template <class Got, class Expected>
consteval bool same_static_shape() {
  if constexpr (Got::rank != Expected::rank) {
    static_assert(check_extents<false, "sequential (nested model)", "input rank", Got::rank, "rank", Expected::rank>::value,
                  "fluxion::nn::sequential: a nested model gets input of another rank than its fluxion::nn::input "
                  "declares.");
    return true;  // reported above
  } else {
    constexpr auto first_difference = [] {
      for (int d = 0; d < Got::rank; ++d)
        if (Got::dims[static_cast<std::size_t>(d)] != Expected::dims[static_cast<std::size_t>(d)]) return d;
      return -1;
    }();
    if constexpr (first_difference >= 0) {
      static_assert(check_extents<false, "sequential (nested model)", "input extent",
                                  Got::dims[static_cast<std::size_t>(first_difference)], "extent",
                                  Expected::dims[static_cast<std::size_t>(first_difference)]>::value,
                    "fluxion::nn::sequential: a nested model gets input of another shape than its fluxion::nn::input "
                    "declares.");
    }
    return true;
  }
}

/// Whether layer L can be part of a model on Device.
template <class Device, class L>
consteval bool runs_on() {
  static_assert(std::is_same_v<Device, cpu> || device_generic_layer<L>,
                "fluxion::nn::sequential: a layer of this model does not say that it runs off the cpu: every "
                "fluxion layer runs on fluxion::cuda, and a layer of your own that does declares `static "
                "constexpr bool device_generic = true;` (the layer's type is in the instantiation context "
                "below).");
  return true;
}

/// A layer of the model's element type and device: layers with variables are re-declared for T
/// and Device (from the layer itself where they can be, keeping settings such as batch_norm's
/// momentum; else by name); the others are moved as they are.
template <class T, class Device, class L>
auto rebind_layer(L&& layer) {
  using R = typename std::remove_cvref_t<L>::template rebind<T, Device>;
  if constexpr (std::is_same_v<R, std::remove_cvref_t<L>>) return std::move(layer);
  else return rebuilt<R>(layer);
}

template <class L>
concept takes_indices = requires { requires L::takes_indices; };

/// Keras's masks in a sequential model: a layer that makes one (embedding<...>::mask_zero,
/// masking), one that uses it (layer(x, mask, training): a recurrent layer or bidirectional, which
/// skips the masked steps, multi_head_attention, whose queries attend to the kept keys only,
/// global_avg_pool1d, whose mean leaves them out), and one that passes it on unchanged (Keras's
/// supports_masking: dense, dropout, layer_norm, activations).
template <class L>
concept produces_mask = requires { requires L::produces_mask; };
template <class L, class T, class Device>
concept takes_mask = requires(L& l, const tensor<T, Device>& x, const tensor<bool, Device>& m) { l(x, m, false); };
/// Whether a layer that takes the mask gives it on (a recurrent layer with ReturnSequences,
/// attention) or consumes it (the last state, a masked mean).
template <class L>
constexpr bool keeps_mask() {
  if constexpr (requires { L::keeps_mask; }) return L::keeps_mask;
  else if constexpr (requires { L::return_sequences; }) return L::return_sequences;
  else return false;
}
template <class L>
concept passes_mask = elementwise_layer<L> || requires { requires L::supports_masking; };
/// Whether a mask comes out of layer L, given whether one goes in: one starts at a layer that
/// makes it; a layer that takes it gives it on if it keeps the time axis (keeps_mask); any other
/// layer passes on what it got. sequential::output_masked folds this over the layers, and run
/// follows it.
template <class L, class T, class Device>
constexpr bool mask_after(bool masked) {
  if constexpr (produces_mask<L>) return true;
  else if constexpr (takes_mask<L, T, Device>) return masked && keeps_mask<L>();
  else return masked;
}
struct no_mask {};

/// The model's element type: the input's, unless the input holds integers (indices) for a first
/// layer that maps them to values (an embedding): then that layer's.
template <class In, class... Layers>
struct model_value {
  using type = In;
};
template <class In, class First, class... Rest>
  requires(std::is_integral_v<In> && takes_indices<First>)
struct model_value<In, First, Rest...> {
  using type = typename First::value_type;
};
template <class In, class... Layers>
using model_value_t = typename model_value<In, Layers...>::type;

}  // namespace detail

template <class T, class InShape, class Device, class... Layers>
class sequential_model : public layer_base<sequential_model<T, InShape, Device, Layers...>, T, Device> {
  static_assert(sizeof...(Layers) > 0, "fluxion::nn::sequential: give at least one layer after the input.");
  static_assert((detail::runs_on<Device, Layers>() && ...));
  using base = layer_base<sequential_model, T, Device>;
  using chain = detail::shape_chain<InShape, Layers...>;
  static constexpr std::size_t count = sizeof...(Layers);

 public:
  static constexpr bool names_itself = false;
  static constexpr bool elementwise = false;
  static constexpr bool device_generic = true;
  static constexpr const char* base_name = "sequential";
  using input_shape_t = InShape;
  using output_shape_t = typename chain::output;
  template <class U, class D = cpu>
  using rebind = sequential_model;  // a model keeps its element type and device; a mismatch fails at its call

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(detail::same_static_shape<static_shape<D...>, InShape>());
    return output_shape_t{};
  }

  /// Builds every layer with fresh variables drawn from `gen`, with Keras's automatic names.
  explicit sequential_model(random::generator& gen, Layers... layers)
      : base(base_name), m_layers(std::move(layers)...) {
    detail::name_counter names;
    std::apply([&](auto&... l) { ((l.name() == l.base_name ? l.set_name(names.next(l.base_name)) : void()), ...); },
               m_layers);
    build_all(gen, std::make_index_sequence<count>{});
  }
  sequential_model() : sequential_model(random::global_generator(), Layers{}...) {}

  /// The output for a batch of inputs of shape (batch, InShape...).
  template <class X>
  tensor<T, Device> operator()(X&& x, bool training = false) {
    auto e = checked_input(std::forward<X>(x));
    if constexpr (input_fits<decltype(e)>)
      return this->collecting_losses([&] { return run<0, false>(std::move(e), training, nullptr); });
    else return {};  // checked_input's message, and no other
  }

  /// Whether Keras's mask of an embedding<...>::mask_zero or masking reaches the output: no layer
  /// after it consumed it (a recurrent layer with ReturnSequences and dense layers after it: a
  /// tagger). The model is then called with output_and_mask, so that the loss can leave the
  /// padding out.
  static constexpr bool output_masked = [] {
    bool masked = false;
    ((masked = detail::mask_after<Layers, T, Device>(masked)), ...);
    return masked;
  }();

  /// Keras's output and output._keras_mask, for a model whose mask reaches its output: a tagger's
  /// per-step logits (batch, time, classes) and the mask (batch, time), for a loss that leaves the
  /// padding out (fx::losses::sparse_softmax_cross_entropy(out.output, labels, out.mask)). fx::fit
  /// and fx::evaluate call it, and give the mask to the loss function as its third argument.
  template <class X>
    requires output_masked
  masked_output<T, Device> output_and_mask(X&& x, bool training = false) {
    masked_output<T, Device> out;
    auto e = checked_input(std::forward<X>(x));
    if constexpr (input_fits<decltype(e)>)
      out.output = this->collecting_losses([&] { return run<0, true>(std::move(e), training, &out.mask); });
    return out;
  }

  /// Draws new initial values for every layer's variables, in order.
  void initialize(random::generator& gen) {
    std::apply([&](auto&... l) { (l.initialize(gen), ...); }, m_layers);
  }
  void build(const fluxion::shape&, random::generator& gen) { initialize(gen); }

  template <std::size_t I>
  auto& layer() {
    return std::get<I>(m_layers);
  }
  static constexpr std::size_t size() { return count; }

  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    std::apply([&](auto&... l) { (l.for_each_variable(prefix + l.name() + "/", f), ...); }, m_layers);
  }

  /// A table of the layers, their per-example output shapes and parameter counts, as Keras's.
  /// Returned, not printed (Keras's summary() prints): `std::cout << net.summary();`.
  [[nodiscard("summary() returns the table; print it: std::cout << net.summary()")]] std::string summary() {
    std::string out = detail::summary_header;
    summary_rows(out, 0);
    out += this->summary_totals();
    return out;
  }
  /// summary()'s rows, indented by depth (the rows of a member of a composite model).
  void summary_rows(std::string& out, int depth) { rows<0>(out, depth); }

 private:
  /// Whether an input expression E has the model's element type (or holds indices for an
  /// embedding first), and its device as well.
  template <class E>
  static constexpr bool input_type_fits =
      std::is_same_v<value_type_t<E>, T> ||
      (detail::takes_indices<std::tuple_element_t<0, std::tuple<Layers...>>> && std::is_integral_v<value_type_t<E>>);
  template <class E>
  static constexpr bool input_fits = input_type_fits<E> && std::is_same_v<device_t<E>, Device>;

  /// The input as an expression, once its element type, device and shape are the model's.
  template <class X>
  auto checked_input(X&& x) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(input_type_fits<decltype(e)>,
                  "fluxion::nn::sequential: the input's element type differs from the model's (the one of its "
                  "fluxion::nn::input); convert it with fluxion::cast<T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::sequential: the input is on another device than the model (the one of its "
                  "fluxion::nn::input); move it with fluxion::to<Device>.");
    detail::check_batch_shape<InShape>("sequential", this->m_name, e.shape());
    return e;
  }

  template <std::size_t... I>
  void build_all(random::generator& gen, std::index_sequence<I...>) {
    (build_one<I>(gen), ...);
  }
  template <std::size_t I>
  void build_one(random::generator& gen) {
    using L = std::tuple_element_t<I, std::tuple<Layers...>>;
    if constexpr (detail::buildable<L>)
      std::get<I>(m_layers).build(detail::runtime_shape<std::tuple_element_t<I, typename chain::inputs>>(), gen);
  }

  // Between layers the value is a tensor, so that each layer's statements have the same types
  // whatever came before it: a program's models then share their kernels and backward functions
  // (compile time), and a kernel-boundary layer (pooling, LSTM) would materialize its input anyway.
  // The exception is an elementwise activation after a layer that takes an epilogue (dense,
  // conv2d, the normalizations): it is fused into that layer's statement.
  //
  // Keras's mask (Mask: detail::no_mask, or a tensor<bool, Device> (batch, time)) starts at an
  // embedding<...>::mask_zero, passes through the layers that keep the time axis, and ends at the
  // recurrent layer that skips the masked steps (or goes on after it, with ReturnSequences).
  template <std::size_t I, bool WantMask, class X, class Mask = detail::no_mask>
  tensor<T, Device> run(X&& x, bool training, tensor<bool, Device>* mask_out, const Mask& mask = {}) {
    constexpr bool masked = !std::is_same_v<Mask, detail::no_mask>;
    if constexpr (I == count) {
      static_assert(!masked || WantMask,
                    "fluxion::nn::sequential: the mask of an embedding<...>::mask_zero or masking reaches the model's "
                    "output (no recurrent layer without ReturnSequences, or global_avg_pool1d, consumed it), so a loss "
                    "of net(x) would count the padding steps; call net.output_and_mask(x) and give the loss the mask "
                    "(fx::losses::sparse_softmax_cross_entropy(out.output, labels, out.mask)), as fx::fit and "
                    "fx::evaluate do, or end the masked part with a recurrent layer that returns its last state.");
      if constexpr (masked) *mask_out = mask;
      return tensor<T, Device>(std::forward<X>(x));
    } else {
      using L = std::tuple_element_t<I, std::tuple<Layers...>>;
      auto& layer = std::get<I>(m_layers);
      if constexpr (detail::produces_mask<L>) {
        const auto ids = fluxion::detail::materialize(std::forward<X>(x));
        const tensor<bool, Device> made = layer.compute_mask(ids);
        return run<I + 1, WantMask>(fluxion::detail::materialize(layer(ids, training)), training, mask_out, made);
      } else if constexpr (masked && detail::takes_mask<L, T, Device>) {  // a recurrent layer, a masked mean
        const tensor<T, Device> y = layer(fluxion::detail::materialize(std::forward<X>(x)), mask, training);
        constexpr bool keeps = detail::mask_after<L, T, Device>(true);
        if constexpr (keeps && requires { layer.output_mask(mask); })  // go_backwards: reversed
          return run<I + 1, WantMask>(y, training, mask_out, layer.output_mask(mask));
        else if constexpr (keeps) return run<I + 1, WantMask>(y, training, mask_out, mask);
        else return run<I + 1, WantMask>(y, training, mask_out);
      } else {
        static_assert(!masked || detail::passes_mask<L>,
                      "fluxion::nn::sequential: this layer cannot take the mask of an embedding<...>::mask_zero or "
                      "masking before it: only dense, dropout, layer_norm and activations pass a mask on (they keep "
                      "the time axis), and a recurrent layer (lstm, gru, simple_rnn, bidirectional), multi_head_attention or "
                      "global_avg_pool1d uses it. "
                      "Put such a layer first, or drop mask_zero / masking (the layer's type is in the "
                      "instantiation context below).");
        if constexpr (I + 1 < count && detail::takes_epilogue<L> &&
                      detail::elementwise_layer<std::tuple_element_t<std::min(I + 1, count - 1), std::tuple<Layers...>>>) {
          return run<I + 2, WantMask>(layer(std::forward<X>(x), training, std::get<I + 1>(m_layers)), training, mask_out, mask);
        } else {
          return run<I + 1, WantMask>(fluxion::detail::materialize(layer(std::forward<X>(x), training)), training, mask_out, mask);
        }
      }
    }
  }

  template <std::size_t I>
  void rows(std::string& out, int depth) {
    if constexpr (I < count) {
      auto& l = std::get<I>(m_layers);
      using Out = std::tuple_element_t<I + 1, decltype(std::tuple_cat(std::declval<typename chain::inputs>(),
                                                                      std::declval<std::tuple<output_shape_t>>()))>;
      detail::summary_row(out, depth, l.name(), Out::text(), detail::trainable_params<T, Device>(l));
      rows<I + 1>(out, depth);
    }
  }

  std::tuple<Layers...> m_layers;
};

/// The model type of sequential(input, layers...): usable as a member of a composite model.
template <class Input, class... Layers>
using sequential_t =
    sequential_model<detail::model_value_t<typename Input::value_type, Layers...>, typename Input::shape_type,
                     typename Input::device_type,
                     typename Layers::template rebind<detail::model_value_t<typename Input::value_type, Layers...>,
                                                      typename Input::device_type>...>;

/// A sequential model: the input's per-example shape, element type and device, then the layers.
/// Variables are drawn from `gen` (or fx::random::global_generator()), on the host, so a model
/// on the GPU starts from the values the same model on the cpu does.
namespace detail {
/// What a layer of a sequential model provides: its type for the model's element type and device
/// (rebind), which also gives its static output shape.
template <class L>
concept sequential_layer = requires { typename L::template rebind<float, cpu>; };
}  // namespace detail

template <class Device, class T, index_t... D, class... Layers>
auto sequential(random::generator& gen, device_input<Device, T, D...>, Layers... layers) {
  static_assert((detail::sequential_layer<Layers> && ...),
                "fluxion::nn::sequential: every layer must be a fluxion::nn layer (or a sequential model); a "
                "composite nn::model has no static output shape, so it cannot be a sequential layer: make the "
                "sequential model a member of the composite one instead (nn::sequential_t).");
  using model = sequential_t<device_input<Device, T, D...>, Layers...>;
  return model(gen, detail::rebind_layer<typename model::value_type, Device>(std::move(layers))...);
}
template <class Device, class T, index_t... D, class... Layers>
auto sequential(device_input<Device, T, D...> in, Layers... layers) {
  return sequential(random::global_generator(), in, std::move(layers)...);
}

}  // namespace fluxion::nn
