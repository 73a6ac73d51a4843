// einsum: NumPy's and TensorFlow's Einstein summation over any number of operands.
//
//   fx::tensor<float> c = fx::einsum("bij,bjk->bik", a, b);       // batched matmul
//   fx::tensor<float> s = fx::einsum("...hqd,...hkd->...hqk", q, k); // attention scores, any batch
//   fx::tensor<float> t = fx::einsum("ij->ji", a);                  // a transpose
//   fx::tensor<float> d = fx::einsum("i,i", u, v);                  // implicit output: a dot product
//   fx::tensor<float> q = fx::einsum("i,ij,j->", x, m, y);         // a bilinear form, three operands
//   fx::tensor<float> r = fx::einsum("ii", m);                      // a trace; "ii->i" the diagonal
//
// Each operand's labels name its axes (letters; "..." stands for the leading axes, which broadcast
// between the operands as in NumPy). Labels missing from the output are summed. Without "->" the
// output is the ellipsis followed by the labels that appear once, in alphabetical order. A label
// repeated within one operand takes its diagonal first (a strided slice). Operands are then
// multiplied in pairs, in opt_einsum's greedy order (TensorFlow's): of the pairs that share a
// label, the one with the smallest product first. Each pair runs as one batched matmul: labels of
// one operand alone that no later step needs are summed first, the rest of each operand is
// transposed to (batch, free, contracted) or (batch, contracted, free) and reshaped to a matrix.
// The last product is transposed to the output's order. The result is a tensor (einsum is a
// kernel boundary), differentiable to any order through those ops.
#pragma once

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/shape.hpp"
#include "evaluate.hpp"
#include "indexing.hpp"
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
  // A label repeated in an operand takes a diagonal (einsum_take_diagonals); in the output it means nothing.
  for (std::size_t i = 0; rank < 0 && i < t.labels.size(); ++i)
    for (std::size_t j = i + 1; j < t.labels.size(); ++j)
      if (t.labels[i] == t.labels[j])
        throw invalid_argument("einsum: \"" + spec + "\": label '" + einsum_label_text(t.labels[i]) + "' appears twice in " +
                               what);
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

/// An operand, or a product of operands, and the label of each of its axes.
template <class T, class D>
struct einsum_operand {
  tensor<T, D> value;
  std::vector<int> labels;
};

/// Sums t over its labels that `keep` lacks; returns the tensor and its remaining labels.
template <class T, class D>
einsum_operand<T, D> einsum_sum_out(const einsum_operand<T, D>& t, const std::vector<int>& keep) {
  std::vector<int> axes_to_sum, rest;
  for (std::size_t d = 0; d < t.labels.size(); ++d) {
    if (einsum_has(keep, t.labels[d])) rest.push_back(t.labels[d]);
    else axes_to_sum.push_back(static_cast<int>(d));
  }
  if (axes_to_sum.empty()) return t;
  return {tensor<T, D>(reduce_sum(t.value, axes(axes_to_sum))), rest};
}

/// t transposed by `perm`, materialized only when its axes move.
template <class T, class D>
tensor<T, D> einsum_transpose(const tensor<T, D>& t, const std::vector<int>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int>(i)) return tensor<T, D>(transpose(t, perm));
  return t;
}

/// t's axes in the order of `order` (labels t has), materialized only when they move.
template <class T, class D>
tensor<T, D> einsum_permute(const einsum_operand<T, D>& t, const std::vector<int>& order) {
  std::vector<int> perm;
  for (int l : order) perm.push_back(einsum_axis(t.labels, l));
  return einsum_transpose(t.value, perm);
}

/// A label repeated within operand `k` ("ii->i", "bii->b") takes the diagonal: its axes move to
/// the end, are reshaped to one of n^c elements and read at multiples of 1 + n + ... + n^(c-1) (a
/// strided slice, take_every_last), leaving the label once, last. Differentiable through the
/// transpose, reshape and slice.
template <class T, class D>
void einsum_take_diagonals(const std::string& spec, einsum_operand<T, D>& x, std::size_t k) {
  for (;;) {
    const auto& labels = x.labels;
    std::size_t first = 0;
    while (first < labels.size() && std::count(labels.begin(), labels.end(), labels[first]) == 1) ++first;
    if (first == labels.size()) return;
    const int l = labels[first];
    const index_t n = x.value.shape()[static_cast<int>(first)];
    std::vector<int> perm, repeated, rest;
    std::vector<index_t> dims;
    for (std::size_t d = 0; d < labels.size(); ++d) {
      const index_t e = x.value.shape()[static_cast<int>(d)];
      if (labels[d] != l) {
        perm.push_back(static_cast<int>(d));
        rest.push_back(labels[d]);
        dims.push_back(e);
      } else if (e != n) {
        throw shape_error("einsum: \"" + spec + "\": label '" + einsum_label_text(l) + "' repeats in operand " +
                          std::to_string(k) + " (shape " + to_string(x.value.shape()) + ") with extents " +
                          std::to_string(n) + " and " + std::to_string(e) + "; a diagonal needs equal ones");
      } else {
        repeated.push_back(static_cast<int>(d));
      }
    }
    index_t stride = 0, size = 1;
    for (std::size_t c = 0; c < repeated.size(); ++c) {
      stride += size;
      size *= n;
    }
    perm.insert(perm.end(), repeated.begin(), repeated.end());
    dims.push_back(size);
    rest.push_back(l);
    x.value = tensor<T, D>(take_every_last(reshape(einsum_transpose(x.value, perm), dims), n, stride));
    x.labels = std::move(rest);
  }
}

/// Two operands' product over the labels `keep` names (the output's and the other operands'): labels
/// that `keep` drops and that are not multiplied over (one operand's alone, or an ellipsis axis of
/// extent 1 against n) are summed first, and the rest runs as one batched matmul: each operand
/// transposed to (batch, free, contracted) or (batch, contracted, free) and reshaped to a matrix. The product's labels are the batch's, then a's free ones, then b's.
template <class T, class D>
einsum_operand<T, D> einsum_pair(const einsum_operand<T, D>& a0, const einsum_operand<T, D>& b0,
                                 const std::vector<int>& keep) {
  auto extent = [](const einsum_operand<T, D>& t, int l) { return t.value.shape()[einsum_axis(t.labels, l)]; };
  // Kept: what `keep` needs (a label one operand broadcasts, 1 against n, is then a batch axis that
  // matmul broadcasts), and what both have with equal extents (multiplied over). A broadcast label
  // nothing needs is summed out of both: sum_l a[0] b[l] = a[0] sum_l b[l].
  auto kept_by = [&](const einsum_operand<T, D>& t, const einsum_operand<T, D>& other) {
    std::vector<int> k;
    for (int l : t.labels)
      if (einsum_has(keep, l) || (einsum_has(other.labels, l) && extent(t, l) == extent(other, l))) k.push_back(l);
    return k;
  };
  const einsum_operand<T, D> a = einsum_sum_out(a0, kept_by(a0, b0)), b = einsum_sum_out(b0, kept_by(b0, a0));
  std::vector<int> batch, a_free, b_free, contracted;
  for (int l : a.labels) {
    if (einsum_has(b.labels, l)) (einsum_has(keep, l) ? batch : contracted).push_back(l);
    else a_free.push_back(l);
  }
  for (int l : b.labels)
    if (!einsum_has(a.labels, l)) b_free.push_back(l);
  index_t m = 1, n = 1, k = 1;
  for (int l : a_free) m *= extent(a, l);
  for (int l : b_free) n *= extent(b, l);
  for (int l : contracted) k *= extent(a, l);
  std::vector<int> order_a = batch, order_b = batch;
  order_a.insert(order_a.end(), a_free.begin(), a_free.end());
  order_a.insert(order_a.end(), contracted.begin(), contracted.end());
  order_b.insert(order_b.end(), contracted.begin(), contracted.end());
  order_b.insert(order_b.end(), b_free.begin(), b_free.end());
  std::vector<index_t> dims_a, dims_b, dims_c;
  for (int l : batch) {
    dims_a.push_back(extent(a, l));
    dims_b.push_back(extent(b, l));
    dims_c.push_back(std::max(extent(a, l), extent(b, l)));
  }
  dims_a.insert(dims_a.end(), {m, k});
  dims_b.insert(dims_b.end(), {k, n});
  for (int l : a_free) dims_c.push_back(extent(a, l));
  for (int l : b_free) dims_c.push_back(extent(b, l));
  const tensor<T, D> ma(reshape(einsum_permute(a, order_a), dims_a));
  const tensor<T, D> mb(reshape(einsum_permute(b, order_b), dims_b));
  std::vector<int> labels_c = batch;
  labels_c.insert(labels_c.end(), a_free.begin(), a_free.end());
  labels_c.insert(labels_c.end(), b_free.begin(), b_free.end());
  return {tensor<T, D>(reshape(matmul(ma, mb), dims_c)), std::move(labels_c)};
}

/// Every label's extent across the operands (after their diagonals): one per letter; an ellipsis
/// axis broadcasts, 1 against n, and has the largest. Indexed by einsum_slot.
inline std::size_t einsum_slot(int label) {
  return label < einsum_ellipsis_label ? static_cast<std::size_t>(label) : 52 + static_cast<std::size_t>(label - einsum_ellipsis_label);
}
template <class T, class D>
std::vector<index_t> einsum_extents(const std::string& spec, const std::vector<einsum_operand<T, D>>& xs,
                                    const std::vector<shape>& given) {
  std::vector<index_t> extent;
  std::vector<std::size_t> owner;
  for (std::size_t k = 0; k < xs.size(); ++k)
    for (std::size_t d = 0; d < xs[k].labels.size(); ++d) {
      const int l = xs[k].labels[d];
      const std::size_t s = einsum_slot(l);
      const index_t e = xs[k].value.shape()[static_cast<int>(d)];
      if (s >= extent.size()) {
        extent.resize(s + 1, -1);
        owner.resize(s + 1, 0);
      }
      const bool ellipsis = l >= einsum_ellipsis_label;
      if (extent[s] < 0 || (ellipsis && extent[s] == 1)) {
        extent[s] = e;
        owner[s] = k;
      } else if (e != extent[s] && !(ellipsis && e == 1)) {
        throw shape_error("einsum: \"" + spec + "\": label '" + einsum_label_text(l) + "' has extent " +
                          std::to_string(extent[s]) + " in operand " + std::to_string(owner[s]) + " (shape " +
                          to_string(given[owner[s]]) + ") and " + std::to_string(e) + " in operand " + std::to_string(k) +
                          " (shape " + to_string(given[k]) + ")");
      }
    }
  return extent;
}

/// einsum over any number of operands: diagonals first, then pairs chosen greedily (opt_einsum's
/// greedy order, as TensorFlow's einsum): of the pairs that share a label (or, where none does, of
/// all), the one whose product is smallest, first in the operands' order on a tie; each product
/// keeps the labels the output or another operand still needs. The last one's remaining labels
/// are summed and moved to the output's order.
template <class T, class D>
tensor<T, D> einsum_run(const std::string& spec, const std::vector<tensor<T, D>>& operands) {
  std::vector<int> ranks;
  std::vector<shape> given;
  for (const auto& x : operands) {
    ranks.push_back(x.rank());
    given.push_back(x.shape());
  }
  const einsum_plan p = plan_einsum(spec, ranks);
  std::vector<einsum_operand<T, D>> xs;
  for (std::size_t k = 0; k < operands.size(); ++k) {
    xs.push_back({operands[k], p.inputs[k].labels});
    einsum_take_diagonals(spec, xs.back(), k);
  }
  const std::vector<index_t> extent = einsum_extents(spec, xs, given);
  const std::vector<int>& out = p.output.labels;
  // The labels the output and the operands but i and j need.
  auto needed = [&](std::size_t i, std::size_t j) {
    std::vector<int> keep = out;
    for (std::size_t o = 0; o < xs.size(); ++o)
      if (o != i && o != j) keep.insert(keep.end(), xs[o].labels.begin(), xs[o].labels.end());
    return keep;
  };
  while (xs.size() > 1) {
    std::size_t best_i = 0, best_j = 1;
    bool best_shares = false;
    double best_size = 0;
    for (std::size_t i = 0; i < xs.size(); ++i)
      for (std::size_t j = i + 1; j < xs.size(); ++j) {
        const std::vector<int> keep = needed(i, j);
        bool shares = false;
        double size = 1;
        for (int l : xs[i].labels) {
          shares = shares || einsum_has(xs[j].labels, l);
          if (einsum_has(keep, l)) size *= static_cast<double>(extent[einsum_slot(l)]);
        }
        for (int l : xs[j].labels)
          if (!einsum_has(xs[i].labels, l) && einsum_has(keep, l)) size *= static_cast<double>(extent[einsum_slot(l)]);
        if ((i == 0 && j == 1) || (shares && !best_shares) || (shares == best_shares && size < best_size)) {
          best_i = i;
          best_j = j;
          best_shares = shares;
          best_size = size;
        }
      }
    einsum_operand<T, D> product = einsum_pair(xs[best_i], xs[best_j], needed(best_i, best_j));
    xs.erase(xs.begin() + static_cast<std::ptrdiff_t>(best_j));
    xs[best_i] = std::move(product);
  }
  return einsum_permute(einsum_sum_out(xs[0], out), out);
}

}  // namespace detail

/// Einstein summation over one or more operands of one element type and device (see the top of
/// this file).
template <class A, class... Rest>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) &&
           ((is_expression_v<Rest> || is_variable_v<std::remove_cvref_t<Rest>>) && ...))
auto einsum(const std::string& spec, A&& a, Rest&&... rest) {
  using T = value_type_t<detail::expr_t<A>>;
  using D = device_t<detail::expr_t<A>>;
  constexpr bool same_types = (std::is_same_v<T, value_type_t<detail::expr_t<Rest>>> && ...);
  constexpr bool same_devices = (std::is_same_v<D, device_t<detail::expr_t<Rest>>> && ...);
  static_assert(same_types, "fluxion::einsum: the operands have different element types; convert one with fluxion::cast<T>.");
  static_assert(same_devices, "fluxion::einsum: the operands live on different devices; move one with fluxion::to<Device>.");
  if constexpr (!same_types || !same_devices) {
    return tensor<T, D>{};  // the static_assert's error alone
  } else {
    detail::check_not_none(a, "einsum");
    (detail::check_not_none(rest, "einsum"), ...);
    return detail::einsum_run<T, D>(
        spec, {tensor<T, D>(detail::materialize(detail::as_expr<A>(std::forward<A>(a)))),
               tensor<T, D>(detail::materialize(detail::as_expr<Rest>(std::forward<Rest>(rest))))...});
  }
}

}  // namespace fluxion
