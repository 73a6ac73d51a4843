// fluxion's optimizers against PyTorch's, 3 steps on two float32 parameters each
// (tests/fixtures/optim/make_fixtures.py, which explains each configuration). Where PyTorch's
// formula differs from Keras's, both sides are configured to compute the same thing: epsilon = 0
// (PyTorch places it differently), Adagrad's accumulator starting at 0.1 on both sides, and a
// constant learning rate (SGD and RMSprop momentum buffers differ by a factor of the rate).
#include <fluxion/io/npy.hpp>
#include <fluxion/optim.hpp>

#include "reference.hpp"

namespace {

fx::tensor<float> load(const std::string& name) {
  return fx::io::load_npy<float>(std::string(FLUXION_TEST_FIXTURES_DIR) + "/optim/" + name + ".npy");
}

/// Entry `i` of a stack of arrays along axis 0.
fx::tensor<float> entry(const fx::tensor<float>& stack, fx::index_t i) {
  fx::shape inner;
  for (int d = 1; d < stack.rank(); ++d) inner.push_back(stack.shape()[d]);
  const auto all = stack.to_vector();
  const auto n = static_cast<std::ptrdiff_t>(inner.size());
  return fx::from_vector(std::vector<float>(all.begin() + i * n, all.begin() + (i + 1) * n), inner);
}

void check_against_pytorch(const std::string& name, fx::optim::optimizer& opt) {
  INFO("case " << name);
  const std::vector<std::string> params{"kernel", "bias"};
  std::vector<fx::tensor<float>> grads, weights;
  for (const auto& p : params) {
    grads.push_back(load(name + "_" + p + "_grads"));
    weights.push_back(load(name + "_" + p + "_weights"));
  }
  REQUIRE(weights[0].shape() == fx::shape{4, 3, 4});
  REQUIRE(weights[1].shape() == fx::shape{4, 5});
  fx::variable<float> kernel{entry(weights[0], 0), "kernel"}, bias{entry(weights[1], 0), "bias"};
  const std::vector<fx::variable<float>*> vars{&kernel, &bias};
  for (fx::index_t step = 0; step < 3; ++step) {
    INFO("after step " << step + 1);
    opt.apply_gradients(std::vector<fx::tensor<float>>{entry(grads[0], step), entry(grads[1], step)}, vars);
    for (std::size_t k = 0; k < vars.size(); ++k) {
      INFO(params[k]);
      const fx::tensor<float> want = entry(weights[k], step + 1);
      REQUIRE(vars[k]->shape() == want.shape());
      test::check_close(vars[k]->peek().to_vector(), want.to_vector(), 1e-5, 1e-6);
    }
  }
  // The weights moved: a case that compared a variable with itself would pass without this.
  CHECK(kernel.peek().to_vector() != entry(weights[0], 0).to_vector());
}

}  // namespace

TEST_CASE("peer: SGD, plain and with Nesterov momentum, matches torch.optim.SGD") {
  fx::optim::sgd plain{0.1};
  check_against_pytorch("sgd", plain);
  fx::optim::sgd nesterov{{.learning_rate = 0.1, .momentum = 0.9, .nesterov = true}};
  check_against_pytorch("sgd_nesterov", nesterov);
}

TEST_CASE("peer: Adagrad matches torch.optim.Adagrad with epsilon 0") {
  fx::optim::adagrad opt{{.learning_rate = 0.1, .initial_accumulator_value = 0.1, .epsilon = 0.0}};
  check_against_pytorch("adagrad", opt);
}

TEST_CASE("peer: RMSprop, plain and centered with momentum, matches torch.optim.RMSprop with epsilon 0") {
  fx::optim::rmsprop plain{{.learning_rate = 0.01, .rho = 0.9, .epsilon = 0.0}};
  check_against_pytorch("rmsprop", plain);
  fx::optim::rmsprop centered{{.learning_rate = 0.01, .rho = 0.9, .momentum = 0.5, .epsilon = 0.0, .centered = true}};
  check_against_pytorch("rmsprop_centered_momentum", centered);
}

TEST_CASE("peer: Adam, with and without AMSGrad, matches torch.optim.Adam with epsilon 0") {
  fx::optim::adam plain{{.learning_rate = 0.01, .epsilon = 0.0}};
  check_against_pytorch("adam", plain);
  fx::optim::adam amsgrad{{.learning_rate = 0.01, .epsilon = 0.0, .amsgrad = true}};
  check_against_pytorch("adam_amsgrad", amsgrad);
}

TEST_CASE("peer: AdamW matches torch.optim.AdamW (decoupled decay 0.004) with epsilon 0") {
  fx::optim::adamw opt{{.learning_rate = 0.01, .weight_decay = 0.004, .epsilon = 0.0}};
  check_against_pytorch("adamw", opt);
}

// No NAdam: PyTorch 1.13's momentum product differs from Keras's (make_fixtures.py says how).
TEST_CASE("peer: Adamax and Adadelta match torch.optim's") {
  fx::optim::adamax adamax{{.learning_rate = 0.01, .epsilon = 0.0}};
  check_against_pytorch("adamax", adamax);
  fx::optim::adadelta adadelta{{.learning_rate = 1.0, .rho = 0.9, .epsilon = 1e-6}};
  check_against_pytorch("adadelta", adadelta);
}
