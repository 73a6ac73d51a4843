// One optimizer step on a variable of 1M floats (4 MB: more than a core's L2, so the update is bound
// by memory traffic) against LibTorch's in the same run, float, 1 and 2 threads (stop 64):
//
//   sgd_momentum, adagrad, rmsprop, adam, adamw   fx::optim's against torch::optim's (LibTorch's C++
//                    optimizers, their defaults but epsilon 1e-7 as Keras's)
//   adamax, nadam, adadelta, lion   fx::optim's against the same formula written with LibTorch's
//                    in-place ops, as torch.optim's single-tensor code writes it (LibTorch's C++
//                    API has no Adamax, NAdam, Adadelta or Lion)
//   adam_ema         Adam with Keras's use_ema (momentum 0.99) against torch::optim::Adam and the
//                    usual EMA line after it, ema.mul_(0.99).add_(p, 0.01)
//   adam_max_norm    Adam on a (1024, 1024) kernel with Keras's max_norm(1) over axis 0 (each
//                    column's norm clipped to 1 after the update; stop 75) against
//                    torch::optim::Adam and the usual renorm after it, p.renorm_(2, 1, 1) (PyTorch
//                    has no constraints; renorm scales the columns whose norm passes 1 by
//                    1 / (norm + 1e-7), Keras's max_norm to within that epsilon)
//   adam_accumulate4 one call of Adam with gradient_accumulation_steps = 4 (three in four add the
//                    gradient to the accumulator, the fourth averages and updates) against
//                    PyTorch's usual accumulation: backward() of loss / 4 adds g / 4 to p.grad,
//                    and every fourth call opt.step() and zero_grad()
//
// fluxion's update is one fused pass over the variable, its gradient and its slots per step (the
// average a second one); LibTorch's optimizers run one pass per in-place op.
//
//   ./optim --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <fluxion/fluxion.hpp>

#include "threads.hpp"

#if FLUXION_BENCH_HAVE_TORCH
#include <ATen/Parallel.h>
#include <torch/torch.h>
#endif

namespace fx = fluxion;

namespace {

constexpr fx::index_t elements = 1 << 20;

const auto add = add_at_both_thread_counts;

/// fluxion: `opt` stepping a variable of `elements` floats with a fixed small gradient.
template <class Optimizer>
std::function<std::function<void()>()> fluxion_case(std::function<Optimizer()> make_optimizer) {
  return [make_optimizer] {
    fx::random::generator gen{1};
    auto w = std::make_shared<fx::variable<float>>(fx::random::uniform<float>({elements}, gen, -1.f, 1.f), "w");
    auto g = std::make_shared<fx::tensor<float>>(fx::random::uniform<float>({elements}, gen, -1e-3f, 1e-3f));
    auto opt = std::make_shared<Optimizer>(make_optimizer());
    return [w, g, opt] {
      opt->apply_gradients(std::vector<fx::tensor<float>>{*g}, std::vector<fx::variable<float>*>{w.get()});
      benchmark::DoNotOptimize(w->peek().data());
    };
  };
}

/// fluxion: Adam stepping a (1024, 1024) kernel with max_norm(1) over axis 0 (its columns), the
/// values drawn so that the update leaves most columns' norms above 1.
std::function<std::function<void()>()> fluxion_max_norm_case() {
  return [] {
    fx::random::generator gen{1};
    const fx::index_t side = 1024;
    auto w = std::make_shared<fx::variable<float>>(fx::random::uniform<float>({side, side}, gen, -1.f, 1.f), "w");
    w->set_constraint(fx::nn::constraints::max_norm(1.0));
    auto g = std::make_shared<fx::tensor<float>>(fx::random::uniform<float>({side, side}, gen, -1e-3f, 1e-3f));
    auto opt = std::make_shared<fx::optim::adam>(0.001);
    return [w, g, opt] {
      opt->apply_gradients(std::vector<fx::tensor<float>>{*g}, std::vector<fx::variable<float>*>{w.get()});
      benchmark::DoNotOptimize(w->peek().data());
    };
  };
}

#if FLUXION_BENCH_HAVE_TORCH
/// torch::optim::Adam on a (1024, 1024) parameter, then p.renorm_(2, 1, 1): each column's norm at
/// most 1, as Keras's max_norm over axis 0.
std::function<std::function<void()>()> torch_max_norm_adam() {
  return [] {
    torch::NoGradGuard no_grad;
    auto p = std::make_shared<torch::Tensor>(torch::rand({1024, 1024}) * 2 - 1);
    p->set_requires_grad(true);
    p->mutable_grad() = (torch::rand({1024, 1024}) * 2 - 1) * 1e-3;
    auto opt = std::make_shared<torch::optim::Adam>(std::vector<torch::Tensor>{*p},
                                                    torch::optim::AdamOptions(0.001).eps(1e-7));
    return [p, opt] {
      opt->step();
      torch::NoGradGuard guard;
      p->detach().renorm_(2, 1, 1);
      benchmark::DoNotOptimize(p->data_ptr());
    };
  };
}

/// A parameter of `elements` floats and its gradient, as torch.optim sees them.
struct torch_parameter {
  torch::Tensor p, g;
  torch_parameter() {
    torch::NoGradGuard no_grad;
    p = torch::rand({elements}) * 2 - 1;
    p.set_requires_grad(true);
    g = (torch::rand({elements}) * 2 - 1) * 1e-3;
    p.mutable_grad() = g.clone();
  }
};

/// torch::optim's optimizer over one parameter.
template <class Optimizer, class Options>
std::function<std::function<void()>()> torch_case(Options options, double ema = 0) {
  return [options, ema] {
    auto param = std::make_shared<torch_parameter>();
    auto opt = std::make_shared<Optimizer>(std::vector<torch::Tensor>{param->p}, options);
    auto average = std::make_shared<torch::Tensor>(param->p.detach().clone());
    return [param, opt, average, ema] {
      opt->step();
      if (ema != 0) {
        torch::NoGradGuard no_grad;
        average->mul_(ema).add_(param->p.detach(), 1 - ema);
      }
      benchmark::DoNotOptimize(param->p.data_ptr());
    };
  };
}

/// PyTorch's gradient accumulation over `steps` calls: p.grad += g / steps (what backward() of
/// loss / steps does), and at every steps-th call Adam's step and zero_grad().
std::function<std::function<void()>()> torch_accumulated_adam(int steps) {
  return [steps] {
    auto param = std::make_shared<torch_parameter>();
    param->p.mutable_grad().zero_();
    auto opt = std::make_shared<torch::optim::Adam>(std::vector<torch::Tensor>{param->p},
                                                    torch::optim::AdamOptions(0.001).eps(1e-7));
    auto calls = std::make_shared<int>(0);
    return [param, opt, calls, steps] {
      {
        torch::NoGradGuard no_grad;
        param->p.mutable_grad().add_(param->g, 1.0 / steps);
      }
      if (++*calls % steps == 0) {
        opt->step();
        param->p.mutable_grad().zero_();
      }
      benchmark::DoNotOptimize(param->p.data_ptr());
    };
  };
}

/// A formula written with LibTorch's in-place ops on (parameter, gradient, state, step): torch.optim's
/// single-tensor code.
std::function<std::function<void()>()> torch_formula(int states,
                                                     std::function<void(torch::Tensor&, const torch::Tensor&,
                                                                        std::vector<torch::Tensor>&, std::int64_t)> step) {
  return [states, step] {
    auto param = std::make_shared<torch_parameter>();
    auto state = std::make_shared<std::vector<torch::Tensor>>();
    for (int k = 0; k < states; ++k) state->push_back(torch::zeros({elements}));
    auto t = std::make_shared<std::int64_t>(0);
    return [param, state, t, step] {
      torch::NoGradGuard no_grad;
      torch::Tensor p = param->p.detach();
      step(p, param->g, *state, ++*t);
      benchmark::DoNotOptimize(p.data_ptr());
    };
  };
}
#endif

const int registered = [] {
  namespace optim = fx::optim;
#if FLUXION_BENCH_HAVE_TORCH
#define FLUXION_BENCH_PEER(...) __VA_ARGS__
#else
#define FLUXION_BENCH_PEER(...)
#endif
  add("sgd_momentum", "fluxion", fluxion_case<optim::sgd>([] { return optim::sgd{{.learning_rate = 0.01, .momentum = 0.9}}; }));
  FLUXION_BENCH_PEER(add("sgd_momentum", "torch", torch_case<torch::optim::SGD>(torch::optim::SGDOptions(0.01).momentum(0.9))));
  add("adagrad", "fluxion", fluxion_case<optim::adagrad>([] { return optim::adagrad{0.01}; }));
  FLUXION_BENCH_PEER(add("adagrad", "torch", torch_case<torch::optim::Adagrad>(torch::optim::AdagradOptions(0.01))));
  add("rmsprop", "fluxion", fluxion_case<optim::rmsprop>([] { return optim::rmsprop{0.001}; }));
  FLUXION_BENCH_PEER(add("rmsprop", "torch",
                         torch_case<torch::optim::RMSprop>(torch::optim::RMSpropOptions(0.001).alpha(0.9).eps(1e-7))));
  add("adam", "fluxion", fluxion_case<optim::adam>([] { return optim::adam{0.001}; }));
  FLUXION_BENCH_PEER(add("adam", "torch", torch_case<torch::optim::Adam>(torch::optim::AdamOptions(0.001).eps(1e-7))));
  add("adamw", "fluxion", fluxion_case<optim::adamw>([] { return optim::adamw{0.001}; }));
  FLUXION_BENCH_PEER(add("adamw", "torch",
                         torch_case<torch::optim::AdamW>(torch::optim::AdamWOptions(0.001).eps(1e-7).weight_decay(0.004))));
  add("adam_ema", "fluxion",
      fluxion_case<optim::adam>([] { return optim::adam{{.learning_rate = 0.001, .use_ema = true, .ema_momentum = 0.99}}; }));
  FLUXION_BENCH_PEER(add("adam_ema", "torch", torch_case<torch::optim::Adam>(torch::optim::AdamOptions(0.001).eps(1e-7), 0.99)));
  add("adam_max_norm", "fluxion", fluxion_max_norm_case());
  FLUXION_BENCH_PEER(add("adam_max_norm", "torch", torch_max_norm_adam()));
  add("adam_accumulate4", "fluxion",
      fluxion_case<optim::adam>([] { return optim::adam{{.learning_rate = 0.001, .gradient_accumulation_steps = 4}}; }));
  FLUXION_BENCH_PEER(add("adam_accumulate4", "torch", torch_accumulated_adam(4)));
  add("adamax", "fluxion", fluxion_case<optim::adamax>([] { return optim::adamax{0.002}; }));
  FLUXION_BENCH_PEER(add("adamax", "torch_ops", torch_formula(2, [](torch::Tensor& p, const torch::Tensor& g, std::vector<torch::Tensor>& s, std::int64_t t) {
    s[0].mul_(0.9).add_(g, 0.1);
    s[1] = torch::maximum(s[1].mul_(0.999), g.abs().add_(1e-7));
    p.addcdiv_(s[0], s[1], -0.002 / (1 - std::pow(0.9, static_cast<double>(t))));
  })));
  add("nadam", "fluxion", fluxion_case<optim::nadam>([] { return optim::nadam{0.002}; }));
  FLUXION_BENCH_PEER(add("nadam", "torch_ops", torch_formula(2, [](torch::Tensor& p, const torch::Tensor& g, std::vector<torch::Tensor>& s, std::int64_t t) {
    const double step = static_cast<double>(t);
    // Keras's momentum product u_1 ... u_t, which fluxion carries from step to step: each u_s is under
    // 0.5, so after 64 steps the product is below 1e-19 and the rest change nothing in double.
    double product = 1;
    for (std::int64_t k = 1; k <= t && k <= 64; ++k) product *= 0.9 * (1 - 0.5 * std::pow(0.96, static_cast<double>(k) * 0.004));
    const double mu = 0.9 * (1 - 0.5 * std::pow(0.96, step * 0.004)), mu_next = 0.9 * (1 - 0.5 * std::pow(0.96, (step + 1) * 0.004));
    s[0].mul_(0.9).add_(g, 0.1);
    s[1].mul_(0.999).addcmul_(g, g, 0.001);
    const torch::Tensor denom = s[1].div(1 - std::pow(0.999, step)).sqrt_().add_(1e-7);
    p.addcdiv_(g, denom, -0.002 * (1 - mu) / (1 - product));
    p.addcdiv_(s[0], denom, -0.002 * mu_next / (1 - product * mu_next));
  })));
  add("adadelta", "fluxion", fluxion_case<optim::adadelta>([] { return optim::adadelta{1.0}; }));
  FLUXION_BENCH_PEER(add("adadelta", "torch_ops", torch_formula(2, [](torch::Tensor& p, const torch::Tensor& g, std::vector<torch::Tensor>& s, std::int64_t) {
    s[0].mul_(0.95).addcmul_(g, g, 0.05);
    const torch::Tensor delta = s[1].add(1e-7).sqrt_().div_(s[0].add(1e-7).sqrt_()).mul_(g);
    s[1].mul_(0.95).addcmul_(delta, delta, 0.05);
    p.add_(delta, -1.0);
  })));
  add("lion", "fluxion", fluxion_case<optim::lion>([] { return optim::lion{1e-4}; }));
  FLUXION_BENCH_PEER(add("lion", "torch_ops", torch_formula(1, [](torch::Tensor& p, const torch::Tensor& g, std::vector<torch::Tensor>& s, std::int64_t) {
    const torch::Tensor update = s[0].mul(0.9).add_(g, 0.1);
    p.add_(update.sign_(), -1e-4);
    s[0].mul_(0.99).add_(g, 0.01);
  })));
#undef FLUXION_BENCH_PEER
  return 0;
}();

}  // namespace
