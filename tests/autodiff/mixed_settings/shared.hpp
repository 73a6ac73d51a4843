// The units of tests/autodiff/mixed_settings, one program: order0.cpp compiled without autodiff,
// order1.cpp with the autodiff tests' settings (first order and forward mode), order2.cpp at second
// order. What each unit does for the others' test cases.
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

/// x^3 - x, materialized in order1.cpp (first order), a statement type order2.cpp differentiates twice.
fluxion::tensor<double> cubic_at_first_order(const fluxion::tensor<double>& x);

}  // namespace mixed_settings
