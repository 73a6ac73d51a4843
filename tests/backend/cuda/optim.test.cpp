// fx::optim on fx::cuda variables: every optimizer and variant updates device variables, one fused
// multi-tensor kernel per apply_gradients, to the values (and slots) the cpu's SIMD loop gives for
// the same gradients.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "fluxion/optim.hpp"
#include "fluxion/tensor/creation.hpp"
#include "same_on_both_devices.hpp"

// The device path is compiled in wherever Thrust's device system is (here: CUDA under nvcc, OpenMP
// in CI, where device memory is host memory and only the GPU run can tell the paths apart).
static_assert(FLUXION_DEVICE_OPTIMIZERS == 1);

namespace {

namespace fx = fluxion;
namespace optim = fluxion::optim;
using fluxion_test::check_values;
using fluxion_test::filled;

/// Three steps of `make()`'s optimizer on three variables (one of 1000 elements, so the cpu runs its
/// vector body and tail, one of 7, and one of 8211: three chunks of the device's multi-tensor
/// kernel, the last one part full), on the cpu and on the device, from the same values and
/// gradients; the values and every slot must agree.
template <class T, class Make>
void same_updates(const Make& make, double rtol) {
  auto cpu_opt = make(), dev_opt = make();
  std::vector<fx::variable<T>> cpu_vars;
  std::vector<fx::variable<T, fx::cuda>> dev_vars;
  const fx::shape shapes[] = {fx::shape{40, 25}, fx::shape{7}, fx::shape{3, 2737}};
  constexpr int n = 3;
  for (int i = 0; i < n; ++i) {
    fx::tensor<T> init = filled<T>(shapes[i], 10 + i);
    cpu_vars.emplace_back(init, "v" + std::to_string(i));
    dev_vars.emplace_back(fx::to<fx::cuda>(init), "v" + std::to_string(i));
  }
  for (int step = 0; step < 3; ++step) {
    std::vector<fx::tensor<T>> cpu_grads;
    std::vector<fx::tensor<T, fx::cuda>> dev_grads;
    for (int i = 0; i < n; ++i) {
      fx::tensor<T> g = filled<T>(shapes[i], 100 + 10 * step + i, -1, 1);
      cpu_grads.push_back(g);
      dev_grads.push_back(fx::to<fx::cuda>(g));
    }
    cpu_opt->apply_gradients(cpu_grads, {&cpu_vars[0], &cpu_vars[1], &cpu_vars[2]});
    dev_opt->apply_gradients(dev_grads, {&dev_vars[0], &dev_vars[1], &dev_vars[2]});
  }
  CHECK(dev_opt->iterations() == 3);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    check_values(fx::to<fx::cpu>(dev_vars[i].peek()).to_vector(), cpu_vars[i].peek().to_vector(), rtol);
  }
  auto cpu_slots = cpu_opt->template slot_variables<T, fx::cpu>();
  auto dev_slots = dev_opt->template slot_variables<T, fx::cuda>();
  REQUIRE(cpu_slots.size() == dev_slots.size());
  for (std::size_t k = 0; k < cpu_slots.size(); ++k) {
    CAPTURE(cpu_slots[k].first);
    CHECK(dev_slots[k].first == cpu_slots[k].first);
    check_values(fx::to<fx::cpu>(dev_slots[k].second->peek()).to_vector(), cpu_slots[k].second->peek().to_vector(),
                 rtol);
  }
}

}  // namespace

TEST_CASE_TEMPLATE("cuda optim: every optimizer updates device variables as on the cpu", T, float, double) {
  const double rtol = std::is_same_v<T, float> ? 2e-6 : 1e-13;
  auto ptr = [](auto o) { return std::make_unique<decltype(o)>(std::move(o)); };
  SUBCASE("sgd") { same_updates<T>([&] { return ptr(optim::sgd{0.1}); }, rtol); }
  SUBCASE("sgd with momentum and weight decay") {
    same_updates<T>([&] { return ptr(optim::sgd{{.learning_rate = 0.1, .momentum = 0.9, .weight_decay = 0.01}}); }, rtol);
  }
  SUBCASE("sgd, Nesterov") {
    same_updates<T>([&] { return ptr(optim::sgd{{.learning_rate = 0.1, .momentum = 0.9, .nesterov = true}}); }, rtol);
  }
  SUBCASE("adagrad") { same_updates<T>([&] { return ptr(optim::adagrad{0.1}); }, rtol); }
  SUBCASE("rmsprop, centered with momentum") {
    same_updates<T>([&] { return ptr(optim::rmsprop{{.learning_rate = 0.01, .momentum = 0.5, .centered = true}}); },
                    rtol);
  }
  SUBCASE("rmsprop") { same_updates<T>([&] { return ptr(optim::rmsprop{0.01}); }, rtol); }
  SUBCASE("adam, amsgrad") { same_updates<T>([&] { return ptr(optim::adam{{.learning_rate = 0.01, .amsgrad = true}}); }, rtol); }
  SUBCASE("adamw") { same_updates<T>([&] { return ptr(optim::adamw{0.01}); }, rtol); }
  SUBCASE("adam with use_ema, overwriting every 2 steps") {
    same_updates<T>(
        [&] { return ptr(optim::adam{{.learning_rate = 0.01, .use_ema = true, .ema_momentum = 0.9, .ema_overwrite_frequency = 2}}); },
        rtol);
  }
  SUBCASE("adamax") { same_updates<T>([&] { return ptr(optim::adamax{0.01}); }, rtol); }
  SUBCASE("nadam") { same_updates<T>([&] { return ptr(optim::nadam{0.01}); }, rtol); }
  SUBCASE("adadelta") { same_updates<T>([&] { return ptr(optim::adadelta{{.learning_rate = 1.0, .epsilon = 1e-6}}); }, rtol); }
  SUBCASE("lion with weight decay") {
    same_updates<T>([&] { return ptr(optim::lion{{.learning_rate = 0.01, .weight_decay = 0.1}}); }, rtol);
  }
  // Keras's clipping: on the device the norms and scales stay there (clip_by_joint_norm).
  SUBCASE("sgd with clipnorm") { same_updates<T>([&] { return ptr(optim::sgd{{.learning_rate = 0.1, .clipnorm = 1.0}}); }, rtol); }
  SUBCASE("adam with global_clipnorm") {
    same_updates<T>([&] { return ptr(optim::adam{{.learning_rate = 0.01, .global_clipnorm = 2.0}}); }, rtol);
  }
  SUBCASE("rmsprop with clipvalue") {
    same_updates<T>([&] { return ptr(optim::rmsprop{{.learning_rate = 0.01, .clipvalue = 0.25}}); }, rtol);
  }
  // Gradient accumulation: three calls of a two-call cycle end with a sum in the accumulators; of a
  // three-call cycle, with one update from the mean and zeroed accumulators.
  SUBCASE("sgd with momentum, accumulating over 2 calls") {
    same_updates<T>([&] { return ptr(optim::sgd{{.learning_rate = 0.1, .momentum = 0.9, .gradient_accumulation_steps = 2}}); },
                    rtol);
  }
  SUBCASE("adam with use_ema and global_clipnorm, accumulating over 3 calls") {
    same_updates<T>([&] {
      return ptr(optim::adam{{.learning_rate = 0.01, .global_clipnorm = 2.0, .use_ema = true, .gradient_accumulation_steps = 3}});
    }, rtol);
  }
}

TEST_CASE("cuda optim: clipping reads nothing back from the device; clip_by_global_norm reads its norm once") {
  const std::vector<fx::tensor<float>> host{filled<float>({300, 20}, 1), filled<float>({7}, 2), filled<float>({5}, 3)};
  std::vector<fx::tensor<float, fx::cuda>> grads;
  for (const auto& g : host) grads.push_back(fx::to<fx::cuda>(g));
  for (optim::gradient_clipping c : {optim::gradient_clipping{.clipnorm = 0.5}, optim::gradient_clipping{.clipvalue = 0.5},
                                     optim::gradient_clipping{.global_clipnorm = 0.5}}) {
    fx::variable<float, fx::cuda> a{fx::to<fx::cuda>(filled<float>({300, 20}, 4)), "a"};
    fx::variable<float, fx::cuda> b{fx::to<fx::cuda>(filled<float>({7}, 5)), "b"};
    fx::variable<float, fx::cuda> c_var{fx::to<fx::cuda>(filled<float>({5}, 6)), "c"};
    optim::sgd opt{0.1};
    opt.set_clipping(c);
    const std::int64_t before = fx::memory::stats<fx::cuda>().host_reads;
    opt.apply_gradients(grads, {a, b, c_var});
    CHECK(fx::memory::stats<fx::cuda>().host_reads == before);
  }
  const std::int64_t before = fx::memory::stats<fx::cuda>().host_reads;
  auto [clipped, norm] = optim::clip_by_global_norm(grads, 1.0);
  CHECK(fx::memory::stats<fx::cuda>().host_reads == before + 1);  // until stop 56: one read per gradient
  CHECK(norm > 1.f);
  // A NaN anywhere makes every clipped gradient NaN, on the device as on the cpu.
  fx::variable<float, fx::cuda> a{fx::to<fx::cuda>(filled<float>({300, 20}, 4)), "a"};
  fx::variable<float, fx::cuda> b{fx::to<fx::cuda>(fx::zeros<float>({2})), "b"};
  optim::sgd opt{{.learning_rate = 1.0, .clipnorm = 1.0}};
  optim::sgd global{{.learning_rate = 1.0, .global_clipnorm = 1.0}};
  const std::vector<fx::tensor<float, fx::cuda>> with_nan{grads[0], fx::to<fx::cuda>(fx::tensor<float>{std::nanf(""), 1.f})};
  opt.apply_gradients(with_nan, {a, b});
  for (float x : fx::to<fx::cpu>(b.peek()).to_vector()) CHECK(std::isnan(x));
  for (float x : fx::to<fx::cpu>(a.peek()).to_vector()) CHECK(!std::isnan(x));  // clipnorm: a's own norm is finite
  global.apply_gradients(with_nan, {a, b});
  for (float x : fx::to<fx::cpu>(a.peek()).to_vector()) CHECK(std::isnan(x));
}

TEST_CASE("cuda optim: one kernel for all variables reads every gradient before any variable changes") {
  // b's gradient is a's value itself: a must be updated into a fresh buffer (the gradient list
  // still holds its old one), and b must read a's old values, as on the cpu, where the variables
  // are updated one after another.
  auto run = [](auto device) {
    using Device = decltype(device);
    fx::variable<double, Device> a{fx::to<Device>(filled<double>({5000}, 1)), "a"};
    fx::variable<double, Device> b{fx::to<Device>(filled<double>({5000}, 2)), "b"};
    optim::adam opt{0.1};
    const fx::tensor<double, Device> old_a = a.peek();
    std::vector<fx::tensor<double, Device>> grads{fx::to<Device>(filled<double>({5000}, 3)), old_a};
    opt.apply_gradients(grads, {&a, &b});
    CHECK(a.peek().data() != old_a.data());
    return std::vector<std::vector<double>>{fx::to<fx::cpu>(a.peek()).to_vector(), fx::to<fx::cpu>(b.peek()).to_vector(),
                                            fx::to<fx::cpu>(old_a).to_vector()};
  };
  const auto want = run(fx::cpu{});
  const auto got = run(fx::cuda{});
  for (std::size_t i = 0; i < want.size(); ++i) check_values(got[i], want[i], 1e-13);
  CHECK(want[2] == filled<double>({5000}, 1).to_vector());  // the gradient list's tensor never changed
}

TEST_CASE("cuda optim: bad input throws before any device variable changes") {
  fx::variable<float, fx::cuda> w{fx::to<fx::cuda>(filled<float>({3, 2}, 1)), "w"};
  const std::vector<float> before = fx::to<fx::cpu>(w.peek()).to_vector();
  optim::adam opt{0.1};
  std::vector<fx::tensor<float, fx::cuda>> wrong{fx::to<fx::cuda>(filled<float>({2, 3}, 2))};
  CHECK_THROWS_WITH_AS(opt.apply_gradients(wrong, {&w}),
                       "apply_gradients: the gradient for variable 'w' has shape (2, 3), but the variable has shape (3, 2)",
                       fx::shape_error);
  CHECK(fx::to<fx::cpu>(w.peek()).to_vector() == before);
  CHECK(opt.iterations() == 0);
}

TEST_CASE_TEMPLATE("cuda optim: clip_by_global_norm on device gradients", T, float, double) {
  std::vector<fx::tensor<T>> cpu_grads{filled<T>({30, 20}, 1), filled<T>({5}, 2)};
  std::vector<fx::tensor<T, fx::cuda>> dev_grads{fx::to<fx::cuda>(cpu_grads[0]), fx::to<fx::cuda>(cpu_grads[1])};
  const double rtol = std::is_same_v<T, float> ? 1e-6 : 1e-13;
  for (double clip : {1.0, 1e6}) {  // clipped, and left as they are
    CAPTURE(clip);
    auto [want, want_norm] = optim::clip_by_global_norm(cpu_grads, clip);
    auto [got, got_norm] = optim::clip_by_global_norm(dev_grads, clip);
    CHECK(static_cast<double>(got_norm) == doctest::Approx(static_cast<double>(want_norm)).epsilon(rtol));
    for (std::size_t i = 0; i < want.size(); ++i)
      check_values(fx::to<fx::cpu>(got[i]).to_vector(), want[i].to_vector(), rtol);
  }
  CHECK_THROWS_AS(optim::clip_by_global_norm(dev_grads, -1.0), fx::invalid_argument);
}

TEST_CASE_TEMPLATE("cuda optim: Keras's constraints project device variables as the cpu's loops do", T, float, double) {
  // The device projects with fused statements, the cpu with plain loops (the norms in double): the
  // same values after an SGD step, for each kind and for axes that leave rows, columns and a
  // convolution's filters.
  const fx::constraint constraints[] = {
      fx::constraint{fx::constraint::kind::max_norm, 0, 1.5, 1, {0}},
      fx::constraint{fx::constraint::kind::min_max_norm, 2.0, 3.0, 0.5, {1}},
      fx::constraint{fx::constraint::kind::unit_norm, 1, 1, 1, {0, 1, 2}},
      fx::constraint{fx::constraint::kind::non_neg, 0, 0, 1, {0}},
      fx::constraint{fx::constraint::kind::max_norm, 0, 0.5, 1, {-1, 0}},
      // Large enough that the cpu splits the rows among its threads (64K elements a task).
      fx::constraint{fx::constraint::kind::max_norm, 0, 5.0, 1, {0}},
      fx::constraint{fx::constraint::kind::min_max_norm, 8.0, 9.0, 0.7, {1}},
      fx::constraint{fx::constraint::kind::unit_norm, 1, 1, 1, {1}}};
  const fx::shape shapes[] = {fx::shape{40, 25},  fx::shape{7, 9},    fx::shape{3, 3, 4, 5}, fx::shape{3, 2737},
                              fx::shape{2, 3, 4}, fx::shape{301, 499}, fx::shape{301, 499},  fx::shape{5, 203, 101}};
  // Three threads, whatever the machine has: the large cases split into three tasks.
  struct threads_guard {
    int before = fx::get_num_threads();
    ~threads_guard() { fx::set_num_threads(before); }
  } guard;
  fx::set_num_threads(3);
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    const fx::tensor<T> init = filled<T>(shapes[i], 40 + i), g = filled<T>(shapes[i], 50 + i, -1, 1);
    fx::variable<T> cpu_var(init, "w");
    fx::variable<T, fx::cuda> dev_var(fx::to<fx::cuda>(init), "w");
    cpu_var.set_constraint(constraints[i]);
    dev_var.set_constraint(constraints[i]);
    optim::sgd cpu_opt{0.5}, dev_opt{0.5};
    cpu_opt.apply_gradients(std::vector<fx::tensor<T>>{g}, std::vector<fx::variable<T>*>{&cpu_var});
    dev_opt.apply_gradients(std::vector<fx::tensor<T, fx::cuda>>{fx::to<fx::cuda>(g)},
                            std::vector<fx::variable<T, fx::cuda>*>{&dev_var});
    const std::vector<T> got = fx::to<fx::cpu>(dev_var.peek()).to_vector(), want = cpu_var.peek().to_vector();
    check_values(got, want, std::is_same_v<T, float> ? 1e-5 : 1e-12);
    if (i == 3)
      for (T v : want) CHECK(v >= T(0));
  }
}
