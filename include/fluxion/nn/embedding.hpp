// fx::nn::embedding<InputDim, OutputDim>: Keras's Embedding, a trainable lookup table.
//
//   fx::nn::embedding<1000, 64> embed;               // 1000 rows of 64 values, uniform(-0.05, 0.05)
//   fx::tensor<float> v = embed(ids);                // ids: int32 or int64 (batch, ...) -> (batch, ..., 64)
//   fx::tensor<bool> m = embed.compute_mask(ids);    // Keras's mask_zero: ids != 0, for a recurrent layer
//   auto clf = fx::nn::sequential(fx::nn::typed_input<std::int32_t, 20>{},
//                                 fx::nn::embedding<1000, 16>::mask_zero{},   // 0 is padding: the LSTM
//                                 fx::nn::lstm<32>{}, fx::nn::dense<2>{});    // skips those steps
//   auto net = fx::nn::sequential(fx::nn::typed_input<std::int32_t, 10>{}, fx::nn::embedding<1000, 64>{},
//                                 fx::nn::flatten{}, fx::nn::dense<1>{});   // a float model of int input
//
// The lookup is fluxion::gather of the table's rows, so it fuses into whatever reads it and its
// gradient reaches only the rows that were looked up. An index outside [0, InputDim) throws
// fx::out_of_range naming the layer, the index and the range. As the first layer of a sequential
// model whose input holds integers, it makes the model's element type its own T.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../expr/indexing.hpp"
#include "../tensor/random.hpp"
#include "module.hpp"

namespace fluxion::nn {

/// Keras's arguments of Embedding beyond its sizes and mask_zero:
/// `fx::nn::embedding<1000, 64>{{.embeddings_initializer = fx::nn::initializers::random_normal(0, 0.01)}}`.
struct embedding_options {
  /// Keras's embeddings_initializer: uniform(-0.05, 0.05).
  initializer embeddings_initializer = initializers::random_uniform(-0.05, 0.05);
  /// Keras's embeddings_regularizer (nn/regularizers.hpp): on the whole table, as Keras's.
  regularizer embeddings_regularizer = {};
  /// Keras's embeddings_constraint (nn/constraints.hpp): unit_norm({1}) keeps every row of norm 1.
  constraint embeddings_constraint = {};
  std::string name = {};
};

template <index_t InputDim, index_t OutputDim, class T = float, class Device = cpu, bool MaskZero = false>
class embedding : public layer_base<embedding<InputDim, OutputDim, T, Device, MaskZero>, T, Device> {
  static_assert(InputDim > 0 && OutputDim > 0,
                "fluxion::nn::embedding<InputDim, OutputDim>: both sizes must be positive.");
  static_assert(std::is_floating_point_v<T>, "fluxion::nn::embedding<InputDim, OutputDim, T>: T must be a "
                                             "floating-point type (the indices are integers, the values are T).");
  using base = layer_base<embedding<InputDim, OutputDim, T, Device, MaskZero>, T, Device>;

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;
  /// Reads integer indices: as a sequential model's first layer, it sets the model's element type.
  static constexpr bool takes_indices = true;
  static constexpr const char* base_name = "embedding";
  static constexpr index_t input_dim = InputDim;
  static constexpr index_t output_dim = OutputDim;
  template <class U, class D = cpu>
  using rebind = embedding<InputDim, OutputDim, U, D, MaskZero>;
  /// Keras's Embedding(mask_zero=True): in a sequential model, index 0 is padding, and the mask
  /// compute_mask gives reaches the recurrent layer after it (through dense, dropout,
  /// layer_norm and activations), which skips those steps. Elsewhere the layer is the same.
  using mask_zero = embedding<InputDim, OutputDim, T, Device, true>;
  /// Whether a sequential model takes compute_mask(ids) on from this layer (mask_zero).
  static constexpr bool produces_mask = MaskZero;
  /// Any per-example shape of indices; each index becomes OutputDim values.
  template <index_t... D>
  static static_shape<D..., OutputDim> output_shape(static_shape<D...>) {
    return {};
  }

  embedding() : embedding(embedding_options{}) {}
  template <layer_name S>
  explicit embedding(S&& name) : embedding(embedding_options{.name = std::string(std::forward<S>(name))}) {}
  explicit embedding(embedding_options options)
      : base(options.name.empty() ? base_name : options.name), m_options(std::move(options)) {
    detail::check_regularizer("embedding '" + this->m_name + "'", "embeddings_regularizer", m_options.embeddings_regularizer);
  }
  /// The same layer for another element type or device (a sequential model's input decides them).
  template <class U, class D, bool M>
    requires(!std::is_same_v<embedding<InputDim, OutputDim, U, D, M>, embedding>)
  explicit embedding(const embedding<InputDim, OutputDim, U, D, M>& other) : embedding(other.options()) {}

  /// The options the layer was made with, under its current name.
  embedding_options options() const {
    embedding_options o = m_options;
    o.name = this->m_name;
    return o;
  }

  bool built() const noexcept { return m_embeddings.has_value(); }
  /// Creates the table (its shape does not depend on the input's).
  void build(const fluxion::shape& /*per_example*/ = {}, random::generator& gen = random::global_generator()) {
    detail::built_or_none(m_embeddings, [&] {
      m_embeddings.emplace(initial_table(gen), this->m_name + "/embeddings");
      detail::attach(*m_embeddings, m_options.embeddings_regularizer, m_options.embeddings_constraint);
    });
  }
  void initialize(random::generator& gen) {
    if (built()) m_embeddings->assign(initial_table(gen));
  }

  /// The rows of the table at `indices`, of shape indices.shape() + (OutputDim).
  template <class X>
  tensor<T, Device> operator()(X&& indices, bool /*training*/ = false) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(indices));
    using I = value_type_t<decltype(e)>;
    static_assert(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>,
                  "fluxion::nn::embedding: the indices must be int32 or int64; convert them with "
                  "fluxion::cast<std::int32_t>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::embedding: the indices are on another device than the table; move them with "
                  "fluxion::to<Device>, or declare the layer as embedding<InputDim, OutputDim, T, Device>.");
    const tensor<I, device_t<decltype(e)>> ids(e);
    if (ids.rank() < 1)
      throw shape_error("embedding '" + this->m_name + "': expects indices of shape (batch, ...), got " +
                        to_string(ids.shape()));
    if (!built()) build();
    // On a device, checked there without waiting (expr/indexing.hpp).
    fluxion::detail::check_index_range(ids, InputDim, [name = this->m_name, s = ids.shape()](index_t k, I v) {
      return "embedding '" + name + "': indices" + fluxion::detail::position_text(k, s) + " = " + std::to_string(v) +
             " is not in [0, " + std::to_string(InputDim) + ") (indices of shape " + to_string(s) + ")";
    });
    return tensor<T, Device>(gather(*m_embeddings, ids, 0, fluxion::detail::checked_indices));
  }

  /// Keras's compute_mask with mask_zero = True: true where an index is not 0 (index 0 is padding),
  /// of the indices' shape; for a recurrent layer's mask, `rnn.call(embed(ids), {.mask = &m})`.
  template <class X>
  static tensor<bool, Device> compute_mask(X&& indices) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(indices));
    using I = value_type_t<decltype(e)>;
    static_assert(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>,
                  "fluxion::nn::embedding::compute_mask: the indices must be int32 or int64.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::embedding::compute_mask: the indices are on another device than the layer's.");
    return tensor<bool, Device>(std::move(e) != I(0));
  }

  variable<T, Device>& embeddings() { return this->require_built(m_embeddings, "embedding", "embeddings"); }

  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    this->visit(prefix, f, m_embeddings, "embeddings");
  }

 private:
  tensor<T, Device> initial_table(random::generator& gen) const {
    return detail::draw_weight<T, Device>(m_options.embeddings_initializer, {InputDim, OutputDim}, gen);
  }
  embedding_options m_options;
  std::optional<variable<T, Device>> m_embeddings;
};

}  // namespace fluxion::nn
