// Rewrites of leaf layouts: broadcasting, axis permutations and the merging of dimensions an
// evaluator can walk as one. These are how shape ops fuse: they never touch memory.
#pragma once

#include <string>

#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "view.hpp"

namespace fluxion::detail {

// The leaf rewrites below, as named types (see unit_inner_stride in view.hpp for why).
struct broadcast_leaf {
  const shape& from;
  const shape& to;
  int shift;
  void operator()(leaf_layout& l) const {
    index_t st[max_rank] = {};
    for (int d = 0; d < from.rank(); ++d) st[d + shift] = from[d] == 1 ? 0 : l.strides[d];
    l.rank = to.rank();
    for (int d = 0; d < to.rank(); ++d) l.strides[d] = st[d];
  }
};
struct permute_leaf {
  const int* perm;
  void operator()(leaf_layout& l) const {
    index_t st[max_rank];
    for (int i = 0; i < l.rank; ++i) st[i] = l.strides[perm[i]];
    for (int i = 0; i < l.rank; ++i) l.strides[i] = st[i];
  }
};
/// Clears `merge` unless axis `outer` steps over exactly one run of axis `inner` (of `extent`).
struct axes_mergeable {
  bool& merge;
  int outer;
  int inner;
  index_t extent;
  void operator()(const leaf_layout& l) const { merge = merge && l.strides[outer] == l.strides[inner] * extent; }
};
/// Keeps axes src[0..n) (increasing), in that order.
struct select_axes_leaf {
  const int* src;
  int n;
  void operator()(leaf_layout& l) const {
    for (int i = 0; i < n; ++i) l.strides[i] = l.strides[src[i]];  // src[i] >= i: safe in place
    l.rank = n;
  }
};

/// Re-expresses every leaf of `v` (laid out for `from`) in the iteration space `to`, which `from`
/// broadcasts to.
template <class View>
void broadcast_view(View& v, const shape& from, const shape& to) {
  if (from == to) return;
  const int shift = to.rank() - from.rank();
  v.for_each_leaf(broadcast_leaf{from, to, shift});
}

/// Permutes the iteration axes: new axis i is old axis perm[i].
template <class View>
void permute_view(View& v, shape& s, const int* perm) {
  shape out;
  for (int i = 0; i < s.rank(); ++i) out.push_back(s[perm[i]]);
  v.for_each_leaf(permute_leaf{perm});
  s = out;
}

/// Merges adjacent iteration axes wherever every leaf walks them as one, and drops extent-1
/// axes. Axes in [0, split) and [split, rank) are never merged with each other (reductions keep
/// their kept and reduced axes apart). Returns the new split.
template <class View>
int collapse_view(View& v, shape& s, int split = -1) {
  const int r = s.rank();
  if (split < 0) split = r;
  if (r == 1 && s[0] != 1) return split;  // nothing to merge or drop: the common 1-D case
  index_t ext[max_rank];
  int src[max_rank];  // the innermost source axis of each output axis
  int n = 0, out_split = 0, prev = -1;
  for (int d = 0; d < r; ++d) {
    if (s[d] == 1) continue;
    bool merge = false;
    if (prev >= 0 && (prev < split) == (d < split)) {
      merge = true;
      v.for_each_leaf(axes_mergeable{merge, prev, d, s[d]});
    }
    if (merge) {
      ext[n - 1] *= s[d];
      src[n - 1] = d;
    } else {
      ext[n] = s[d];
      src[n] = d;
      if (d < split) ++out_split;
      ++n;
    }
    prev = d;
  }
  if (n == r) {  // nothing merged or dropped
    bool same = true;
    for (int i = 0; i < n; ++i) same = same && src[i] == i;
    if (same) return out_split;
  }
  s = shape(ext, ext + n);
  v.for_each_leaf(select_axes_leaf{src, n});
  return out_split;
}

}  // namespace fluxion::detail

namespace fluxion::detail {

/// Visits a view and a destination layout together, so one collapse covers both.
template <class View>
struct with_destination {
  View view;
  leaf_layout dest;
  void for_each_leaf(leaf_function f) {
    view.for_each_leaf(f);
    f(dest);
  }
  FLUXION_HOST_DEVICE void seek(const index_t* c, int n) {
    view.seek(c, n);
    dest.seek(c, n);
  }
};

/// A row-major destination layout for shape s, starting at `offset`, inside a buffer whose
/// row-major strides are `strides` (concat and pad write into sub-blocks this way).
inline leaf_layout destination_layout(const shape& s, index_t offset, const index_t* strides) {
  leaf_layout l;
  l.offset = offset;
  l.rank = s.rank();
  for (int d = 0; d < s.rank(); ++d) l.strides[d] = s[d] == 1 ? 0 : strides[d];
  return l;
}
inline leaf_layout destination_layout(const shape& s) {
  leaf_layout l;
  l.offset = 0;
  l.rank = s.rank();
  index_t acc = 1;
  for (int d = l.rank - 1; d >= 0; --d) {
    l.strides[d] = s[d] == 1 ? 0 : acc;
    acc *= s[d];
  }
  return l;
}

/// Iteration space of a reduction: kept axes first, reduced axes last, each group collapsed.
struct reduction_space {
  shape iter;      // the collapsed iteration shape
  int split = 0;   // iter[0, split) are kept, iter[split, rank) reduced
  index_t n_out = 1, n_red = 1;
};

template <class View>
reduction_space prepare_reduction(View& v, shape s, unsigned mask) {
  int perm[max_rank];
  int n = 0, kept = 0;
  for (int d = 0; d < s.rank(); ++d)
    if (!(mask >> d & 1u)) perm[n++] = d;
  kept = n;
  for (int d = 0; d < s.rank(); ++d)
    if (mask >> d & 1u) perm[n++] = d;
  permute_view(v, s, perm);
  reduction_space r;
  r.split = collapse_view(v, s, kept);
  r.iter = s;
  for (int d = 0; d < s.rank(); ++d) (d < r.split ? r.n_out : r.n_red) *= s[d];
  return r;
}

/// Unravels a row number into the coordinates of all axes but the innermost.
FLUXION_HOST_DEVICE void unravel_outer(index_t row, const index_t* ext, int rank, index_t* coord) {
  for (int d = rank - 2; d >= 0; --d) {
    coord[d] = row % ext[d];
    row /= ext[d];
  }
}

}  // namespace fluxion::detail
