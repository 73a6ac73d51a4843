// fx::nn::multi_head_attention<NumHeads, KeyDim, ValueDim>: Keras's MultiHeadAttention, the core
// of a Transformer block.
//
//   fx::nn::multi_head_attention<4, 16> mha;             // 4 heads, keys and values of 16 per head
//   fx::tensor<float> y = mha(x);                       // self-attention: (batch, time, e) -> (batch, time, e)
//   auto z = mha.call(query, value, key, {.attention_mask = &mask, .attention_scores = &scores});
//   fx::nn::multi_head_attention<4, 16> decoder{fx::nn::causal_mask};   // each step sees itself and the past
//   fx::nn::multi_head_attention<4, 16> block{{.use_causal_mask = true, .dropout = 0.1}};
//
// As Keras (attention_axes = the time axis, use_bias, no dropout): per head h,
//   q_h = query W_q[:, h] + b_q[h],  k_h = key W_k[:, h] + b_k[h],  v_h = value W_v[:, h] + b_v[h]
//   a_h = softmax(q_h k_h^T / sqrt(KeyDim) + mask),   y = sum_h (a_h v_h) W_o[h] + b_o
// where the mask adds -1e9 to each (query, key) pair that attention_mask (batch, Tq, Tk) marks
// false or that the causal mask hides (key after query). The output has the query's feature size.
// Variables, named as Keras's: query/kernel (e_q, NumHeads, KeyDim), query/bias (NumHeads, KeyDim),
// key/kernel, key/bias, value/kernel (e_v, NumHeads, ValueDim), value/bias,
// attention_output/kernel (NumHeads, ValueDim, e_q), attention_output/bias (e_q); glorot-uniform
// kernels with Keras's fans of their shapes, zero biases. Every step is an ordinary statement
// (batched matmuls, a softmax), so the layer is differentiable to any order and runs on any device.
// With dropout, training calls drop attention weights as Keras does (an nn::dropout inside, so a
// recomputed segment or compiled step replays the mask); the scores returned are the weights
// before dropout, as Keras's. Not Keras's: attention over more than one axis.
#pragma once

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "../expr/elementwise.hpp"
#include "../expr/matmul.hpp"
#include "../expr/remap.hpp"
#include "../tensor/creation.hpp"
#include "activations.hpp"
#include "dropout.hpp"
#include "initializers.hpp"
#include "module.hpp"

namespace fluxion::nn {

/// Tag: a multi_head_attention whose calls hide the keys after each query (Keras's
/// use_causal_mask=True), for a decoder's self-attention.
struct causal_mask_t {};
inline constexpr causal_mask_t causal_mask{};

/// The optional arguments of multi_head_attention::call.
template <class T, class Device = cpu>
struct attention_arguments {
  const tensor<bool, Device>* attention_mask = nullptr;  // (batch, Tq, Tk): true where a query may attend
  bool use_causal_mask = false;                          // also hide the keys after each query
  tensor<T, Device>* attention_scores = nullptr;         // receives the weights (batch, heads, Tq, Tk)
  bool training = false;                                 // drop attention weights (with a dropout rate)
};

/// The settings of a multi_head_attention, Keras's constructor arguments.
struct attention_options {
  bool use_causal_mask = false;  // every call hides the keys after each query
  double dropout = 0.0;          // the rate at which training calls drop attention weights, in [0, 1)
  std::uint64_t seed = 0;        // the dropout masks' generator
  /// Keras's kernel_initializer and bias_initializer of the four projections (Keras's fans of each
  /// kernel's shape), and their kernel_regularizer and bias_regularizer (nn/regularizers.hpp).
  initializer kernel_initializer = initializers::glorot_uniform();
  initializer bias_initializer = initializers::zeros();
  regularizer kernel_regularizer = {};
  regularizer bias_regularizer = {};
  /// Keras's kernel_constraint and bias_constraint (nn/constraints.hpp).
  constraint kernel_constraint = {};
  constraint bias_constraint = {};
};

namespace detail {

/// x (batch, time, e) through kernel (e, heads, dim) and bias (heads, dim): (batch, heads, time, dim).
template <class T, class Device>
tensor<T, Device> project_heads(const tensor<T, Device>& x, const variable<T, Device>& kernel,
                                const variable<T, Device>& bias, index_t heads, index_t dim) {
  const fluxion::shape& s = x.shape();
  const tensor<T, Device> p =
      matmul(reshape(x, {s[0] * s[1], s[2]}), reshape(kernel, {s[2], heads * dim})) + reshape(bias, {heads * dim});
  return tensor<T, Device>(transpose(reshape(p, {s[0], s[1], heads, dim}), {0, 2, 1, 3}));
}

/// The attention's variables, in Keras's order.
template <class T, class Device>
struct attention_variables {
  variable<T, Device>*query_kernel, *query_bias, *key_kernel, *key_bias, *value_kernel, *value_bias, *output_kernel,
      *output_bias;
};

/// The statements of every multi_head_attention of element type T (one instance per program).
/// query (B, Tq, e_q), key (B, Tk, e_k), value (B, Tk, e_v), all checked; `drop` (a dropout
/// layer in training mode) or nullptr.
template <class T, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> attention_forward(const tensor<T, Device>& query, const tensor<T, Device>& key,
                                    const tensor<T, Device>& value, const attention_variables<T, Device>& v,
                                    index_t heads, index_t key_dim, index_t value_dim,
                                    const tensor<bool, Device>* mask, bool causal, tensor<T, Device>* scores,
                                    const dropout* drop) {
  const index_t batch = query.shape()[0], tq = query.shape()[1], tk = key.shape()[1], e = query.shape()[2];
  const tensor<T, Device> q = project_heads(query, *v.query_kernel, *v.query_bias, heads, key_dim);
  const tensor<T, Device> k = project_heads(key, *v.key_kernel, *v.key_bias, heads, key_dim);
  const tensor<T, Device> vv = project_heads(value, *v.value_kernel, *v.value_bias, heads, value_dim);
  const T scale = static_cast<T>(1 / std::sqrt(static_cast<double>(key_dim)));
  tensor<T, Device> logits = matmul(q, k, transpose_b) * scale;  // (B, H, Tq, Tk)
  const T hidden = T(-1e9);  // Keras's large negative number: exp() of it is 0, a row of them uniform
  if (mask) logits = logits + (T(1) - cast<T>(reshape(*mask, {batch, 1, tq, tk}))) * hidden;
  if (causal) {
    std::vector<T> c(static_cast<std::size_t>(tq * tk), T(0));
    for (index_t i = 0; i < tq; ++i)
      for (index_t j = i + 1; j < tk; ++j) c[static_cast<std::size_t>(i * tk + j)] = hidden;
    logits = logits + fluxion::detail::device_copy<Device>(from_vector(c, {tq, tk}));
  }
  const tensor<T, Device> weights = fluxion::softmax(logits, -1);
  if (scores) *scores = weights;
  const tensor<T, Device> heads_out = matmul(drop ? tensor<T, Device>((*drop)(weights, true)) : weights, vv);  // (B, H, Tq, Dv)
  const tensor<T, Device> merged = reshape(transpose(heads_out, {0, 2, 1, 3}), {batch * tq, heads * value_dim});
  return tensor<T, Device>(reshape(
      matmul(merged, reshape(*v.output_kernel, {heads * value_dim, e})) + *v.output_bias, {batch, tq, e}));
}

}  // namespace detail

template <index_t NumHeads, index_t KeyDim, index_t ValueDim = KeyDim, class T = float, class Device = cpu>
class multi_head_attention
    : public layer_base<multi_head_attention<NumHeads, KeyDim, ValueDim, T, Device>, T, Device> {
  static_assert(NumHeads > 0 && KeyDim > 0 && ValueDim > 0,
                "fluxion::nn::multi_head_attention<NumHeads, KeyDim, ValueDim>: every size must be positive.");
  static_assert(std::is_floating_point_v<T>,
                "fluxion::nn::multi_head_attention<NumHeads, KeyDim, ValueDim, T>: T must be a floating-point type.");
  using base = layer_base<multi_head_attention, T, Device>;

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;
  static constexpr const char* base_name = "multi_head_attention";
  static constexpr index_t num_heads = NumHeads, key_dim = KeyDim, value_dim = ValueDim;
  template <class U, class D = cpu>
  using rebind = multi_head_attention<NumHeads, KeyDim, ValueDim, U, D>;
  /// Self-attention keeps the per-example shape (time, features).
  template <index_t... D>
  static auto output_shape(static_shape<D...> s) {
    static_assert(detail::check_extents<sizeof...(D) == 2, "multi_head_attention", "input rank", sizeof...(D),
                                        "rank", 2>::value,
                  "fluxion::nn::multi_head_attention: the input must be (time, features) per example (rank 2); "
                  "reshape it first, e.g. with fluxion::nn::reshape<Time, Features>.");
    return s;
  }

  multi_head_attention() : multi_head_attention(attention_options{}) {}
  /// A name of its own. (A template, so that {.dropout = 0.1} never reads as a string.)
  template <class S>
    requires std::is_convertible_v<S, std::string>
  explicit multi_head_attention(S&& name) : multi_head_attention(attention_options{}, std::string(std::forward<S>(name))) {}
  /// Every call hides the keys after each query (a decoder's self-attention).
  explicit multi_head_attention(causal_mask_t, std::string name = {})
      : multi_head_attention(attention_options{.use_causal_mask = true}, std::move(name)) {}
  multi_head_attention(attention_options options, std::string name = {})  // NOLINT: implicit, for {{.dropout = 0.1}}
      : base(name.empty() ? base_name : std::move(name)), m_options(options),
        m_dropout(detail::check_dropout_rate("multi_head_attention '" + this->m_name + "'", "dropout", options.dropout), options.seed) {
    detail::check_regularizer("multi_head_attention '" + this->m_name + "'", "kernel_regularizer", options.kernel_regularizer);
    detail::check_regularizer("multi_head_attention '" + this->m_name + "'", "bias_regularizer", options.bias_regularizer);
  }
  /// The same layer for another element type or device (a sequential model re-declares its
  /// layers for its own), keeping its name and options (and its dropout's generator).
  template <class U, class D>
    requires(!std::is_same_v<multi_head_attention<NumHeads, KeyDim, ValueDim, U, D>, multi_head_attention>)
  explicit multi_head_attention(const multi_head_attention<NumHeads, KeyDim, ValueDim, U, D>& other)
      : base(other.name()), m_options(other.options()), m_dropout(other.dropout_layer()) {}

  const attention_options& options() const noexcept { return m_options; }
  bool causal() const noexcept { return m_options.use_causal_mask; }
  /// The dropout on the attention weights (rate options().dropout).
  const dropout& dropout_layer() const noexcept { return m_dropout; }
  bool built() const noexcept { return m_query_kernel.has_value(); }
  /// Builds for self-attention over per-example input (time, features).
  void build(const fluxion::shape& per_example, random::generator& gen = random::global_generator()) {
    if (per_example.rank() != 2)
      throw shape_error("multi_head_attention '" + this->m_name + "': expects (batch, time, features) input, got (batch, " +
                        to_string(per_example).substr(1));
    build(per_example[1], per_example[1], per_example[1], gen);
  }
  /// Builds for queries, values and keys of these feature sizes.
  void build(index_t query_features, index_t value_features, index_t key_features,
             random::generator& gen = random::global_generator()) {
    m_query = query_features;
    m_value = value_features;
    m_key = key_features;
    std::array<tensor<T, Device>, 8> values = initial_values(gen);
    const std::string& n = this->m_name;
    const char* names[] = {"/query/kernel", "/query/bias", "/key/kernel", "/key/bias",
                           "/value/kernel", "/value/bias", "/attention_output/kernel", "/attention_output/bias"};
    const auto all = members();
    try {  // a constraint's axis a variable does not have leaves the layer unbuilt
      for (std::size_t i = 0; i < 8; ++i) {
        all[i]->emplace(std::move(values[i]), n + names[i]);
        if (i % 2 == 0) detail::attach(**all[i], m_options.kernel_regularizer, m_options.kernel_constraint);
        else detail::attach(**all[i], m_options.bias_regularizer, m_options.bias_constraint);
      }
    } catch (...) {
      for (auto* v : all) v->reset();
      throw;
    }
  }
  /// Draws new initial values into the same variables (their names, ids and optimizer slots stay).
  void initialize(random::generator& gen) {
    if (!built()) return;
    std::array<tensor<T, Device>, 8> values = initial_values(gen);
    const auto all = members();
    for (std::size_t i = 0; i < 8; ++i) (*all[i])->assign(values[i]);
  }

  /// Self-attention: x is the query, the key and the value.
  template <class X>
  tensor<T, Device> operator()(X&& x, bool training = false) {
    const tensor<T, Device> in = input("the input", std::forward<X>(x));
    return call(in, in, in, {.training = training});
  }

  /// Self-attention under Keras's mask of the sequence, m (batch, time), false at padding (the mask
  /// an embedding<...>::mask_zero or masking gives, which nn::sequential passes here): a query
  /// attends to the keys the mask keeps, as Keras's implicit query and value masks do
  /// (attention_mask[b, i, j] = m[b, i] && m[b, j]); the output keeps the mask.
  template <class X>
  tensor<T, Device> operator()(X&& x, const tensor<bool, Device>& mask, bool training = false) {
    const tensor<T, Device> in = input("the input", std::forward<X>(x));
    const fluxion::shape& s = in.shape();
    detail::check_sequence_mask("multi_head_attention '" + this->m_name + "'", mask.shape(), s);
    const tensor<bool, Device> pairs(reshape(mask, {s[0], s[1], 1}) && reshape(mask, {s[0], 1, s[1]}));
    return call(in, in, in, {.attention_mask = &pairs, .training = training});
  }
  /// In nn::sequential the output keeps the input's mask (Keras's compute_mask: the query's).
  static constexpr bool keeps_mask = true;

  /// Attention of `query` (batch, Tq, e_q) over `key` (batch, Tk, e_k) and `value` (batch, Tk,
  /// e_v), Keras's call(query, value, key, attention_mask, return_attention_scores,
  /// use_causal_mask): the output is (batch, Tq, e_q).
  template <class Q, class V, class K>
  tensor<T, Device> call(Q&& query, V&& value, K&& key, const attention_arguments<T, Device>& args = {}) {
    const tensor<T, Device> q = input("the query", std::forward<Q>(query));
    const tensor<T, Device> v = input("the value", std::forward<V>(value));
    const tensor<T, Device> k = input("the key", std::forward<K>(key));
    if (!built()) build(q.shape()[2], v.shape()[2], k.shape()[2]);
    const std::string who = "multi_head_attention '" + this->m_name + "': ";
    auto features = [&](const char* what, const tensor<T, Device>& t, index_t want) {
      if (t.shape()[2] != want)
        throw shape_error(who + what + " " + to_string(t.shape()) + " has " + std::to_string(t.shape()[2]) +
                          " features, the layer was built for " + std::to_string(want));
    };
    features("the query", q, m_query);
    features("the value", v, m_value);
    features("the key", k, m_key);
    if (v.shape()[0] != q.shape()[0] || k.shape()[0] != q.shape()[0] || k.shape()[1] != v.shape()[1])
      throw shape_error(who + "the query " + to_string(q.shape()) + ", value " + to_string(v.shape()) + " and key " +
                        to_string(k.shape()) + " must share the batch, and the key and value their time steps");
    if (args.attention_mask &&
        args.attention_mask->shape() != fluxion::shape{q.shape()[0], q.shape()[1], k.shape()[1]})
      throw shape_error(who + "attention_mask " + to_string(args.attention_mask->shape()) + " must be (batch, Tq, Tk) = " +
                        to_string(fluxion::shape{q.shape()[0], q.shape()[1], k.shape()[1]}));
    const detail::attention_variables<T, Device> vars{&*m_query_kernel, &*m_query_bias,  &*m_key_kernel,
                                                      &*m_key_bias,     &*m_value_kernel, &*m_value_bias,
                                                      &*m_output_kernel, &*m_output_bias};
    const bool drops = args.training && m_options.dropout > 0;
    return detail::attention_forward<T>(q, k, v, vars, NumHeads, KeyDim, ValueDim, args.attention_mask,
                                        m_options.use_causal_mask || args.use_causal_mask, args.attention_scores,
                                        drops ? &m_dropout : nullptr);
  }
  /// call with the value as the key.
  template <class Q, class V>
  tensor<T, Device> call(Q&& query, V&& value, const attention_arguments<T, Device>& args = {}) {
    const tensor<T, Device> v = input("the value", std::forward<V>(value));
    return call(std::forward<Q>(query), v, v, args);
  }

  variable<T, Device>& query_kernel() { return need(m_query_kernel, "query/kernel"); }
  variable<T, Device>& query_bias() { return need(m_query_bias, "query/bias"); }
  variable<T, Device>& key_kernel() { return need(m_key_kernel, "key/kernel"); }
  variable<T, Device>& key_bias() { return need(m_key_bias, "key/bias"); }
  variable<T, Device>& value_kernel() { return need(m_value_kernel, "value/kernel"); }
  variable<T, Device>& value_bias() { return need(m_value_bias, "value/bias"); }
  variable<T, Device>& output_kernel() { return need(m_output_kernel, "attention_output/kernel"); }
  variable<T, Device>& output_bias() { return need(m_output_bias, "attention_output/bias"); }

  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    this->visit(prefix, f, m_query_kernel, "query/kernel");
    this->visit(prefix, f, m_query_bias, "query/bias");
    this->visit(prefix, f, m_key_kernel, "key/kernel");
    this->visit(prefix, f, m_key_bias, "key/bias");
    this->visit(prefix, f, m_value_kernel, "value/kernel");
    this->visit(prefix, f, m_value_bias, "value/bias");
    this->visit(prefix, f, m_output_kernel, "attention_output/kernel");
    this->visit(prefix, f, m_output_bias, "attention_output/bias");
  }

 private:
  template <class X>
  tensor<T, Device> input(const char* what, X&& x) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,
                  "fluxion::nn::multi_head_attention: an input's element type differs from the layer's; convert it "
                  "with fluxion::cast<T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::multi_head_attention: an input is on another device than the layer's variables; "
                  "move it with fluxion::to<Device>, or declare the layer with that device.");
    tensor<T, Device> t = fluxion::detail::materialize_asserted<T, Device>(e);
    if (t.rank() != 3 || t.shape()[1] < 1)
      throw shape_error("multi_head_attention '" + this->m_name + "': " + what +
                        " must be (batch, time >= 1, features), got " + to_string(t.shape()));
    return t;
  }
  variable<T, Device>& need(std::optional<variable<T, Device>>& v, const char* what) {
    return this->require_built(v, "multi_head_attention", what);
  }
  /// The variables in Keras's order: query, key, value and output, each kernel then bias.
  std::array<std::optional<variable<T, Device>>*, 8> members() {
    return {&m_query_kernel, &m_query_bias, &m_key_kernel, &m_key_bias,
            &m_value_kernel, &m_value_bias, &m_output_kernel, &m_output_bias};
  }
  /// Their initial values in that order, drawn in that order (Keras's fans of each kernel's shape).
  std::array<tensor<T, Device>, 8> initial_values(random::generator& gen) const {
    const initializer& k = m_options.kernel_initializer;
    const initializer& b = m_options.bias_initializer;
    return {detail::draw_weight<T, Device>(k, {m_query, NumHeads, KeyDim}, gen),
            detail::draw_weight<T, Device>(b, {NumHeads, KeyDim}, gen),
            detail::draw_weight<T, Device>(k, {m_key, NumHeads, KeyDim}, gen),
            detail::draw_weight<T, Device>(b, {NumHeads, KeyDim}, gen),
            detail::draw_weight<T, Device>(k, {m_value, NumHeads, ValueDim}, gen),
            detail::draw_weight<T, Device>(b, {NumHeads, ValueDim}, gen),
            detail::draw_weight<T, Device>(k, {NumHeads, ValueDim, m_query}, gen),
            detail::draw_weight<T, Device>(b, {m_query}, gen)};
  }
  index_t m_query = 0, m_value = 0, m_key = 0;
  attention_options m_options;
  dropout m_dropout;
  std::optional<variable<T, Device>> m_query_kernel, m_query_bias, m_key_kernel, m_key_bias, m_value_kernel,
      m_value_bias, m_output_kernel, m_output_bias;
};

}  // namespace fluxion::nn
