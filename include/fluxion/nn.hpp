// The model layer: layers that own their variables, sequential models checked at compile time,
// composite models (fluxion/nn/module.hpp). Optimizers are in fluxion/optim.hpp, losses and
// metrics in fluxion/losses.hpp and fluxion/metrics.hpp.
#pragma once

#include "nn/activations.hpp"
#include "nn/attention.hpp"
#include "nn/batch_norm.hpp"
#include "nn/bidirectional.hpp"
#include "nn/conv1d.hpp"
#include "nn/conv2d.hpp"
#include "nn/conv2d_transpose.hpp"
#include "nn/dense.hpp"
#include "nn/depthwise_conv2d.hpp"
#include "nn/dropout.hpp"
#include "nn/embedding.hpp"
#include "nn/gru.hpp"
#include "nn/initializers.hpp"
#include "nn/layer_norm.hpp"
#include "nn/lstm.hpp"
#include "nn/masking.hpp"
#include "nn/module.hpp"
#include "nn/pooling.hpp"
#include "nn/compiled_step.hpp"
#include "nn/recompute.hpp"
#include "nn/reshape.hpp"
#include "nn/reversible.hpp"
#include "nn/sequential.hpp"
#include "nn/upsampling.hpp"
