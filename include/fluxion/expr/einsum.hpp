// einsum: NumPy's and TensorFlow's Einstein summation over one or two operands.
//
//   fx::tensor<float> c = fx::einsum("bij,bjk->bik", a, b);       // batched matmul
//   fx::tensor<float> s = fx::einsum("...hqd,...hkd->...hqk", q, k); // attention scores, any batch
//   fx::tensor<float> t = fx::einsum("ij->ji", a);                  // a transpose
//   fx::tensor<float> d = fx::einsum("i,i", u, v);                  // implicit output: a dot product
//
// Each operand's labels name its axes (letters; "..." stands for the leading axes, which broadcast
// between the operands as in NumPy). Labels missing from the output are summed. Without "->" the
// output is the ellipsis followed by the labels that appear once, in alphabetical order. Two
// operands run as one batched matmul: labels of one operand alone that the output drops are summed
// first, the rest of each operand is transposed to (batch, free, contracted) or (batch,
// contracted, free) and reshaped to a matrix, and the product is reshaped and transposed to the
// output's order. The result is a tensor (einsum is a kernel boundary), differentiable to any
// order through those ops. A label repeated within one operand (a diagonal or trace) is refused.
#pragma once

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/shape.hpp"
#include "evaluate.hpp"
#include "matmul.hpp"
#include "reduce.hpp"
#include "remap.hpp"

namespace fluxion {

namespace detail {

/// One operand's (or the output's) labels: letters as 0..51, the ellipsis's axes as 100 + their
/// position counted from the last of them (so that ellipses of different lengths align at the end).
struct einsum_term {
  std::vector<int> labels;
  bool ellipsis = false;
};

struct einsum_plan {
  std::vector<einsum_term> inputs;
  einsum_term output;
};

inline constexpr int einsum_ellipsis_label = 100;

template <class = void>
std::string einsum_label_text(int label) {
  if (label >= einsum_ellipsis_label) return "... axis " + std::to_string(label - einsum_ellipsis_label) + " from the end";
  return std::string(1, label < 26 ? static_cast<char>('a' + label) : static_cast<char>('A' + label - 26));
}

/// Parses one term; `rank` (or -1 for the output) expands its ellipsis.
template <class = void>
einsum_term parse_einsum_term(const std::string& spec, const std::string& term, int rank, int ellipsis_rank,
                                     const std::string& what) {
  einsum_term t;
  std::vector<int> before, after;
  std::vector<int>* into = &before;
  for (std::size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (c == '.') {
      if (t.ellipsis || term.compare(i, 3, "...") != 0)
        throw invalid_argument("einsum: \"" + spec + "\": " + what + " has a '.' that is not one \"...\"");
      t.ellipsis = true;
      into = &after;
      i += 2;
    } else if (c >= 'a' && c <= 'z') {
      into->push_back(c - 'a');
    } else if (c >= 'A' && c <= 'Z') {
      into->push_back(26 + (c - 'A'));
    } else {
      throw invalid_argument("einsum: \"" + spec + "\": " + what + " has the character '" + std::string(1, c) +
                             "'; labels are letters, and \"...\" stands for leading axes");
    }
  }
  const int letters = static_cast<int>(before.size() + after.size());
  int dots = 0;
  if (rank >= 0) {
    if (t.ellipsis ? letters > rank : letters != rank)
      throw shape_error("einsum: \"" + spec + "\": " + what + " has " + std::to_string(letters) + " labels" +
                        (t.ellipsis ? " and \"...\"" : "") + " for an operand of rank " + std::to_string(rank));
    dots = rank - letters;
  } else {
    dots = t.ellipsis ? ellipsis_rank : 0;
  }
  t.labels = before;
  for (int j = dots - 1; j >= 0; --j) t.labels.push_back(einsum_ellipsis_label + j);
  t.labels.insert(t.labels.end(), after.begin(), after.end());
  for (std::size_t i = 0; i < t.labels.size(); ++i)
    for (std::size_t j = i + 1; j < t.labels.size(); ++j)
      if (t.labels[i] == t.labels[j])
        throw invalid_argument("einsum: \"" + spec + "\": label '" + einsum_label_text(t.labels[i]) + "' appears twice in " +
                               what + "; diagonals and traces are not supported");
  return t;
}

template <class = void>
einsum_plan plan_einsum(const std::string& spec, const std::vector<int>& ranks) {
  std::string s;
  for (char c : spec)
    if (c != ' ') s += c;
  const auto arrow = s.find("->");
  const std::string lhs = s.substr(0, arrow);
  std::vector<std::string> terms;
  for (std::size_t start = 0;;) {
    const auto comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size())
    throw invalid_argument("einsum: \"" + spec + "\" names " + std::to_string(terms.size()) + " operands, but " +
                           std::to_string(ranks.size()) + " were given");
  einsum_plan p;
  int ellipsis_rank = 0;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    p.inputs.push_back(parse_einsum_term(spec, terms[i], ranks[i], 0, "operand " + std::to_string(i)));
    for (int l : p.inputs.back().labels)
      if (l >= einsum_ellipsis_label) ellipsis_rank = std::max(ellipsis_rank, l - einsum_ellipsis_label + 1);
  }
  if (arrow != std::string::npos) {
    p.output = parse_einsum_term(spec, s.substr(arrow + 2), -1, ellipsis_rank, "the output");
    const bool any_ellipsis = std::any_of(p.inputs.begin(), p.inputs.end(), [](const einsum_term& t) { return t.ellipsis; });
    if (p.output.ellipsis && !any_ellipsis)
      throw invalid_argument("einsum: \"" + spec + "\": the output has \"...\" but no operand does");
    for (int l : p.output.labels) {
      const bool found = std::any_of(p.inputs.begin(), p.inputs.end(), [&](const einsum_term& t) {
        return std::find(t.labels.begin(), t.labels.end(), l) != t.labels.end();
      });
      if (!found)
        throw invalid_argument("einsum: \"" + spec + "\": the output's label '" + einsum_label_text(l) + "' is in no operand");
    }
    // An ellipsis dropped from the output sums its axes, as NumPy does.
  } else {
    for (int j = ellipsis_rank - 1; j >= 0; --j) p.output.labels.push_back(einsum_ellipsis_label + j);
    for (int l = 0; l < 52; ++l) {
      int count = 0;
      for (const auto& t : p.inputs) count += static_cast<int>(std::count(t.labels.begin(), t.labels.end(), l));
      if (count == 1) p.output.labels.push_back(l);
    }
  }
  return p;
}

template <class = void>
bool einsum_has(const std::vector<int>& labels, int l) {
  return std::find(labels.begin(), labels.end(), l) != labels.end();
}
template <class = void>
int einsum_axis(const std::vector<int>& labels, int l) {
  return static_cast<int>(std::find(labels.begin(), labels.end(), l) - labels.begin());
}

/// Sums t over its labels that `keep` lacks; returns the tensor and its remaining labels.
template <class T, class D>
std::pair<tensor<T, D>, std::vector<int>> einsum_sum_out(const tensor<T, D>& t, const std::vector<int>& labels,
                                                         const std::vector<int>& keep) {
  std::vector<int> axes_to_sum, rest;
  for (std::size_t d = 0; d < labels.size(); ++d) {
    if (einsum_has(keep, labels[d])) rest.push_back(labels[d]);
    else axes_to_sum.push_back(static_cast<int>(d));
  }
  if (axes_to_sum.empty()) return {t, labels};
  return {tensor<T, D>(reduce_sum(t, axes(axes_to_sum))), rest};
}

/// t's axes in the order of `order` (labels t has), materialized only when they move.
template <class T, class D>
tensor<T, D> einsum_permute(const tensor<T, D>& t, const std::vector<int>& labels, const std::vector<int>& order) {
  std::vector<int> perm;
  for (int l : order) perm.push_back(einsum_axis(labels, l));
  bool identity = true;
  for (std::size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int>(i);
  if (identity) return t;
  return tensor<T, D>(transpose(t, perm));
}

template <class T, class D>
tensor<T, D> einsum_one(const einsum_plan& p, const tensor<T, D>& a) {
  auto [summed, labels] = einsum_sum_out(a, p.inputs[0].labels, p.output.labels);
  return einsum_permute(summed, labels, p.output.labels);
}

template <class T, class D>
tensor<T, D> einsum_two(const std::string& spec, const einsum_plan& p, const tensor<T, D>& a, const tensor<T, D>& b) {
  const auto &la0 = p.inputs[0].labels, &lb0 = p.inputs[1].labels, &out = p.output.labels;
  // Extents: equal for letters; ellipsis axes broadcast (1 against n).
  for (std::size_t i = 0; i < la0.size(); ++i)
    if (einsum_has(lb0, la0[i])) {
      const index_t ea = a.shape()[static_cast<int>(i)], eb = b.shape()[einsum_axis(lb0, la0[i])];
      const bool broadcasts = la0[i] >= einsum_ellipsis_label && (ea == 1 || eb == 1) && einsum_has(out, la0[i]);
      if (ea != eb && !broadcasts)
        throw shape_error("einsum: \"" + spec + "\": label '" + einsum_label_text(la0[i]) + "' has extent " +
                          std::to_string(ea) + " in operand 0 (shape " + to_string(a.shape()) + ") and " +
                          std::to_string(eb) + " in operand 1 (shape " + to_string(b.shape()) + ")");
    }
  // Labels of one operand alone that the output drops: summed first.
  std::vector<int> keep_a = out, keep_b = out;
  keep_a.insert(keep_a.end(), lb0.begin(), lb0.end());
  keep_b.insert(keep_b.end(), la0.begin(), la0.end());
  auto [ta, la] = einsum_sum_out(a, la0, keep_a);
  auto [tb, lb] = einsum_sum_out(b, lb0, keep_b);
  std::vector<int> batch, a_free, b_free, contracted;
  for (int l : la) {
    if (einsum_has(lb, l)) (einsum_has(out, l) ? batch : contracted).push_back(l);
    else a_free.push_back(l);
  }
  for (int l : lb)
    if (!einsum_has(la, l)) b_free.push_back(l);
  auto extent = [](const tensor<T, D>& t, const std::vector<int>& labels, int l) { return t.shape()[einsum_axis(labels, l)]; };
  index_t m = 1, n = 1, k = 1;
  for (int l : a_free) m *= extent(ta, la, l);
  for (int l : b_free) n *= extent(tb, lb, l);
  for (int l : contracted) k *= extent(ta, la, l);
  std::vector<int> order_a = batch, order_b = batch;
  order_a.insert(order_a.end(), a_free.begin(), a_free.end());
  order_a.insert(order_a.end(), contracted.begin(), contracted.end());
  order_b.insert(order_b.end(), contracted.begin(), contracted.end());
  order_b.insert(order_b.end(), b_free.begin(), b_free.end());
  std::vector<index_t> dims_a, dims_b, dims_c;
  for (int l : batch) {
    dims_a.push_back(extent(ta, la, l));
    dims_b.push_back(extent(tb, lb, l));
    dims_c.push_back(std::max(extent(ta, la, l), extent(tb, lb, l)));
  }
  dims_a.insert(dims_a.end(), {m, k});
  dims_b.insert(dims_b.end(), {k, n});
  for (int l : a_free) dims_c.push_back(extent(ta, la, l));
  for (int l : b_free) dims_c.push_back(extent(tb, lb, l));
  const tensor<T, D> ma(reshape(einsum_permute(ta, la, order_a), dims_a));
  const tensor<T, D> mb(reshape(einsum_permute(tb, lb, order_b), dims_b));
  const tensor<T, D> product(reshape(matmul(ma, mb), dims_c));
  std::vector<int> labels_c = batch;
  labels_c.insert(labels_c.end(), a_free.begin(), a_free.end());
  labels_c.insert(labels_c.end(), b_free.begin(), b_free.end());
  return einsum_permute(product, labels_c, out);
}

}  // namespace detail

/// Einstein summation over one operand (see the top of this file).
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto einsum(const std::string& spec, A&& a) {
  using E = detail::expr_t<A>;
  detail::check_not_none(a, "einsum");
  const auto x = detail::materialize(detail::as_expr<A>(std::forward<A>(a)));
  const detail::einsum_plan p = detail::plan_einsum(spec, {x.rank()});
  return detail::einsum_one<value_type_t<E>, device_t<E>>(p, x);
}

/// Einstein summation over two operands of one element type and device (see the top of this file).
template <class A, class B>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) &&
           (is_expression_v<B> || is_variable_v<std::remove_cvref_t<B>>))
auto einsum(const std::string& spec, A&& a, B&& b) {
  using EA = detail::expr_t<A>;
  using EB = detail::expr_t<B>;
  static_assert(std::is_same_v<value_type_t<EA>, value_type_t<EB>>,
                "fluxion::einsum: the operands have different element types; convert one with fluxion::cast<T>.");
  static_assert(std::is_same_v<device_t<EA>, device_t<EB>>,
                "fluxion::einsum: the operands live on different devices; move one with fluxion::to<Device>.");
  detail::check_not_none(a, "einsum");
  detail::check_not_none(b, "einsum");
  const auto x = detail::materialize(detail::as_expr<A>(std::forward<A>(a)));
  const auto y = detail::materialize(detail::as_expr<B>(std::forward<B>(b)));
  const detail::einsum_plan p = detail::plan_einsum(spec, {x.rank(), y.rank()});
  return detail::einsum_two<value_type_t<EA>, device_t<EA>>(spec, p, x, y);
}

}  // namespace fluxion
