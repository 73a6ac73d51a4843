// Facade: tensors, expressions, reductions and the CPU evaluator.
#pragma once

#include "backend/cpu/evaluator.hpp"
#include "expr/elementwise.hpp"
#include "expr/evaluate.hpp"
#include "expr/reduce.hpp"
#include "tensor/tensor.hpp"
