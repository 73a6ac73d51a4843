// Keras's weight regularizers: a penalty on a variable's value that training adds to the loss.
//
//   fx::nn::dense<256> fc{{.kernel_regularizer = fx::nn::regularizers::l2(1e-4)}};
//   fx::fit(net, opt, loss_fn, data);                    // the loss is loss_fn's + 1e-4 sum(W^2)
//
//   // A loop of your own adds it, as Keras's `loss + sum(model.losses)`, after the call (which
//   // regularization_loss() also reads the layers' added losses of: nn::add_loss below):
//   fx::gradient_tape tape;
//   fx::tensor<float> out = net(x, true);
//   fx::tensor<float> loss = loss_fn(out, y) + net.regularization_loss();
//
// l1(a) is a sum(|w|), l2(a) a sum(w^2) (no 1/2: Keras's), l1_l2(a, b) both; Keras's defaults
// (0.01, and 0 for l1_l2's). The penalty is a fluxion::regularizer kept on the variable
// (variable::set_regularizer attaches one to any variable, as Keras's add_weight(regularizer=));
// a model's regularization_loss() is the sum over its trainable variables, as Keras's
// `model.losses`: a frozen layer's weights add nothing. fx::fit, fx::evaluate and nn::compile_step
// add its value to the loss they report, and fit and compile_step its gradient, 2 l2 w + l1 sign(w)
// (|w|'s derivative 0 at 0, as TensorFlow's), to the variables' gradients, without recording the
// penalty on the tape: a program that trains through them compiles no backward rule for it.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "../tensor.hpp"
#include "../tensor/creation.hpp"

namespace fluxion::nn {

namespace regularizers {

namespace detail {
inline double checked(double v, const char* name, const char* what) {
  if (!(v >= 0) || !std::isfinite(v))
    throw invalid_argument(std::string("regularizers::") + name + ": " + what + " = " + fluxion::detail::value_text(v) +
                           " must be finite and not negative");
  return v;
}
}  // namespace detail

/// Keras's L1: l1 * sum(|w|).
inline regularizer l1(double l1 = 0.01) { return {detail::checked(l1, "l1", "l1"), 0}; }
/// Keras's L2: l2 * sum(w^2).
inline regularizer l2(double l2 = 0.01) { return {0, detail::checked(l2, "l2", "l2")}; }
/// Keras's L1L2: l1 * sum(|w|) + l2 * sum(w^2).
inline regularizer l1_l2(double l1 = 0, double l2 = 0) {
  return {detail::checked(l1, "l1_l2", "l1"), detail::checked(l2, "l1_l2", "l2")};
}

}  // namespace regularizers

/// Whether any of `vars` has a penalty.
template <class T, class Device>
bool has_regularizers(const std::vector<variable<T, Device>*>& vars) {
  for (const auto* v : vars)
    if (v->regularizer()) return true;
  return false;
}

namespace detail {
/// total plus the penalty of each of `vars` that has one, recorded by no tape: fit's, evaluate's
/// and compile_step's loss plus the penalties. They add the penalties' gradients themselves
/// (add_penalty_gradients), so a program compiles no backward rule for them. Config: as the
/// layers' statements (nn/prebuilt.hpp compiles the float ones once).
template <class T, class Device, int Config = fluxion::detail::autodiff_config>
tensor<T, Device> with_penalties(tensor<T, Device> total, const std::vector<variable<T, Device>*>& vars) {
  for (const auto* v : vars) {
    const regularizer& r = v->regularizer();
    const tensor<T, Device>& w = v->peek();
    if (!r) continue;
    // The terms first, then the sum of a tensor: no reduction of an expression, whose backward
    // rule the program would compile (boundaries compile theirs even where nothing records).
    const tensor<T, Device> terms =
        fluxion::detail::materialize_unrecorded(static_cast<T>(r.l1) * abs(w) + static_cast<T>(r.l2) * square(w));
    total = fluxion::detail::materialize_unrecorded(total + reduce_sum(terms));
  }
  return total;
}

/// gradients[i] += l1 sign(w) + (2 l2) w for each vars[i] with a penalty, the gradient the tape's
/// rules give regularization_loss() (a none gradient, a variable the loss does not read, becomes
/// the penalty's alone).
template <class T, class Device, int Config = fluxion::detail::autodiff_config>
void add_penalty_gradients(std::vector<tensor<T, Device>>& gradients, const std::vector<variable<T, Device>*>& vars) {
  for (std::size_t i = 0; i < vars.size() && i < gradients.size(); ++i) {
    const regularizer& r = vars[i]->regularizer();
    if (!r || !vars[i]->trainable()) continue;
    const tensor<T, Device>& w = vars[i]->peek();
    const T l1 = static_cast<T>(r.l1), l2x2 = static_cast<T>(r.l2) * T(2);
    if (gradients[i].is_none() || gradients[i].shape() != w.shape())
      gradients[i] = fluxion::detail::materialize_unrecorded(l1 * sign(w) + l2x2 * w);
    else
      gradients[i] = fluxion::detail::materialize_unrecorded(gradients[i] + (l1 * sign(w) + l2x2 * w));
  }
}
}  // namespace detail

/// Keras's add_loss: the losses a model's layers add to the training loss while the model runs
/// (nn::activity_regularization's penalty, a variational autoencoder's KL term), gathered by the
/// innermost loss_scope of the thread for their element type and device. Every model's call opens
/// one (nn::sequential, nn::model), keeps what its layers added as its added_losses() and passes it
/// on to the scope around it; fx::fit, fx::evaluate and nn::compile_step add the model's to the
/// loss, and a loop of your own adds them with the model's regularization_loss():
///
///   struct vae : fx::nn::model<vae> {
///     ...
///     auto call(const fx::tensor<float>& x, bool training) {
///       ...
///       fx::nn::add_loss(fx::tensor<float>(-0.5f * fx::reduce_mean(1 + log_var - square(mu) - exp(log_var))));
///       return decoder(z, training);
///     }
///   };
///   fx::tensor<float> out = net(x, true);                    // first: the call adds the KL term
///   fx::tensor<float> loss = loss_fn(out, x) + net.regularization_loss();  // the KL term too
///
/// Call the model in a statement before the one that reads regularization_loss(): C++ evaluates
/// the operands of `loss_fn(net(x, true), y) + net.regularization_loss()` in either order (g++
/// reads the second first), and the last call's losses would be added. Under a gradient tape that
/// throws, naming the model; fit, evaluate and compile_step read them in order.
namespace detail {
/// first + each of `losses`, as a tape sees it: a model's regularization_loss(), a scope's total().
template <class T, class Device>
tensor<T, Device> plus_losses(tensor<T, Device> first, const std::vector<tensor<T, Device>>& losses) {
  for (const tensor<T, Device>& l : losses) first = tensor<T, Device>(first + l);
  return first;
}
}  // namespace detail

template <class T, class Device = cpu>
class loss_scope {
 public:
  loss_scope() { stack().push_back(&m_losses); }
  ~loss_scope() { stack().pop_back(); }
  loss_scope(const loss_scope&) = delete;
  loss_scope& operator=(const loss_scope&) = delete;

  /// The losses added while this scope was the innermost, in the order they were added.
  const std::vector<tensor<T, Device>>& losses() const noexcept { return m_losses; }
  bool empty() const noexcept { return m_losses.empty(); }
  /// Their sum, as a tape sees it (differentiable); 0 when none was added.
  tensor<T, Device> total() const { return detail::plus_losses(zeros<T, Device>(shape{}), m_losses); }
  /// The innermost scope's list on this thread, or null where none is open.
  static std::vector<tensor<T, Device>>* innermost() noexcept { return stack().empty() ? nullptr : stack().back(); }
  /// The list of the scope this one is inside of (the innermost before it opened), or null.
  std::vector<tensor<T, Device>>* outer() const noexcept {
    const auto& s = stack();
    return s.size() >= 2 && s.back() == &m_losses ? s[s.size() - 2] : nullptr;
  }

 private:
  struct scopes {
    static inline thread_local std::vector<std::vector<tensor<T, Device>>*> open;
  };
  static std::vector<std::vector<tensor<T, Device>>*>& stack() noexcept { return scopes::open; }
  std::vector<tensor<T, Device>> m_losses;
};

/// Adds `loss`, one value, to the losses of the model that is running (Keras's layer.add_loss). A
/// shape_error when it holds more than one value (reduce it first); an fx::error outside every
/// model's call, fx::fit's or an open loss_scope of its element type and device, where the loss
/// would count nowhere.
template <class T, class Device>
void add_loss(const tensor<T, Device>& loss) {
  if (loss.size() != 1)
    throw shape_error("nn::add_loss: the loss must be one value, got shape " + to_string(loss.shape()) +
                      "; reduce it with fx::reduce_sum or fx::reduce_mean first");
  std::vector<tensor<T, Device>>* into = loss_scope<T, Device>::innermost();
  if (!into)
    throw error("nn::add_loss: no model's call is running on this thread (none of the loss's element type and "
                "device), so the loss would count nowhere; add it inside the call of an nn::sequential or nn::model "
                "(fx::fit, fx::evaluate and nn::compile_step then add it to the loss, and net.regularization_loss() "
                "holds it), or open an fx::nn::loss_scope<T, Device> around the code and add its total()");
  into->push_back(loss.rank() == 0 ? loss : tensor<T, Device>(reshape(loss, std::vector<index_t>{})));
}


/// The sum of the penalties of `vars` (a model's trainable_variables()), a scalar: l1 sum(|w|) +
/// l2 sum(w^2) for each variable that has one, read as a tape sees it (differentiable), 0 when none
/// has.
template <class T, class Device>
tensor<T, Device> regularization_loss(const std::vector<variable<T, Device>*>& vars) {
  tensor<T, Device> total = zeros<T, Device>(shape{});
  for (const auto* v : vars)
    if (const regularizer& r = v->regularizer())  // one statement whatever the terms
      total = tensor<T, Device>(total + reduce_sum(static_cast<T>(r.l1) * abs(*v) + static_cast<T>(r.l2) * square(*v)));
  return total;
}

}  // namespace fluxion::nn
