// What tests/autodiff/mixed_settings/order0.cpp (compiled without autodiff) does for order1.cpp
// (compiled with the autodiff tests' settings: first order and forward mode), in one program.
#pragma once

#include <fluxion/fluxion.hpp>

#include <string>

namespace mixed_settings {

/// y = 2 x + 1, a statement type order1.cpp materializes too.
fluxion::tensor<double> affine(const fluxion::tensor<double>& x);
/// A dense layer's inference in this unit (its kernel and bias given): the layer's code and
/// nn::detail::nothing_records() are compiled here without autodiff.
fluxion::tensor<double> dense_inference(const fluxion::tensor<double>& x);
/// An LSTM's and a batch norm's forward passes in this unit.
fluxion::tensor<double> lstm_inference(const fluxion::tensor<double>& x);
fluxion::tensor<double> batch_norm_training(const fluxion::tensor<double>& x);
/// The per-segment maxima of x's rows (segments 0 0 1), here.
fluxion::tensor<double> segment_maxima(const fluxion::tensor<double>& x);
/// exp(x) * 3 - x: a statement type that only this unit materializes.
fluxion::tensor<double> only_here(const fluxion::tensor<double>& x);
/// What tape.gradient says in a unit without autodiff: the error's text, or "no error".
std::string gradient_in_this_unit();

}  // namespace mixed_settings
