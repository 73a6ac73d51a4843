// Facade: tensors, variables, fused expressions, reductions, shape ops, convolution and pooling,
// and the CPU evaluator.
#pragma once

#include "backend/cpu/evaluator.hpp"
#include "expr/conv.hpp"
#include "expr/elementwise.hpp"
#include "expr/evaluate.hpp"
#include "expr/indexing.hpp"
#include "expr/matmul.hpp"
#include "expr/reduce.hpp"
#include "expr/remap.hpp"
#include "expr/einsum.hpp"
#include "expr/scan.hpp"
#include "expr/sort.hpp"
#include "tensor/tensor.hpp"
#include "tensor/transfer.hpp"  // fx::to, fx::synchronize (every device)
#include "tensor/variable.hpp"
#include "autodiff/conv.hpp"
#include "autodiff/custom_gradient.hpp"
#include "autodiff/forward.hpp"
#include "autodiff/functional.hpp"
#include "autodiff/tape.hpp"
#include "backend/cpu/prebuilt.hpp"  // extern templates, with FLUXION_PREBUILT_KERNELS
#include "expr/gather_nd.hpp"       // gather_nd, scatter_nd: ops of the ops above, last
#include "expr/segment_reduce.hpp"  // unsorted_segment_max and _min
#include "autodiff/recurrence.hpp"  // cumprod, linear_recurrence and their derivatives
#include "expr/linalg.hpp"            // band_part, diag_part, trace, diag, set_diag (compositions)
