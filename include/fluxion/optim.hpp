// Facade: optimizers, learning-rate schedules and gradient clipping (Keras semantics).
//
//   #include <fluxion/optim.hpp>
//   fx::optim::adam opt{fx::optim::cosine_decay(1e-3, /*decay_steps=*/10000)};
//   fx::gradient_tape tape;
//   auto loss = fx::reduce_mean(fx::square(y - model(x)));
//   auto [grads, norm] = fx::optim::clip_by_global_norm(tape.gradient(loss, vars), 1.0);
//   opt.apply_gradients(grads, vars);
//
// fx::optim::sgd, adagrad, rmsprop, adam, adamw, adamax, nadam, adadelta and lion (Keras's) share fx::optim::optimizer (optim/optimizer.hpp):
// iterations(), learning_rate(), slot_variables() for checkpoints, and one fused update loop per
// variable. Each takes Keras's clipping, moving-average and gradient-accumulation options:
//   fx::optim::adam opt{{.learning_rate = 1e-3, .gradient_accumulation_steps = 4}};  // updates every 4th call
#pragma once

#include "optim/adadelta.hpp"
#include "optim/adagrad.hpp"
#include "optim/adam.hpp"
#include "optim/adamax.hpp"
#include "optim/clip.hpp"
#include "optim/lion.hpp"
#include "optim/nadam.hpp"
#include "optim/optimizer.hpp"
#include "optim/rmsprop.hpp"
#include "optim/schedules.hpp"
#include "optim/sgd.hpp"
