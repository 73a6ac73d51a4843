// fx::checkpoint with fx::cuda variables and optimizer slots: saved from the device, restored to
// it, the same file as the cpu's, and across devices in both directions. A refused file leaves the
// device variables as they were.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../../scratch_dir.hpp"
#include "fluxion/io.hpp"
#include "fluxion/optim.hpp"
#include "same_on_both_devices.hpp"

static_assert(FLUXION_DEVICE_OPTIMIZERS == 1);

namespace {

namespace fx = fluxion;
using fluxion_test::filled;

/// A model of two device (or cpu) variables, as a user writes one for the GPU: variables() lists them.
template <class Device>
struct two_layer {
  fx::variable<float, Device> kernel, bias;
  explicit two_layer(std::uint64_t seed)
      : kernel(on<Device>(filled<float>({30, 20}, seed)), "dense/kernel"),
        bias(on<Device>(filled<float>({20}, seed + 1)), "dense/bias") {}
  std::vector<fx::variable<float, Device>*> variables() { return {&kernel, &bias}; }

  template <class D>
  static fx::tensor<float, D> on(const fx::tensor<float>& t) {
    if constexpr (std::is_same_v<D, fx::cpu>) return t;
    else return fx::to<D>(t);
  }
};

template <class Device>
std::vector<float> host_values(const fx::variable<float, Device>& v) {
  if constexpr (std::is_same_v<Device, fx::cpu>) return v.peek().to_vector();
  else return fx::to<fx::cpu>(v.peek()).to_vector();
}

/// Two Adam steps on the model, with gradients made on the host.
template <class Device>
void train(two_layer<Device>& m, fx::optim::adam& opt, std::uint64_t seed) {
  for (int step = 0; step < 2; ++step) {
    std::vector<fx::tensor<float, Device>> grads{two_layer<Device>::template on<Device>(filled<float>({30, 20}, seed + 10 * step)),
                                                 two_layer<Device>::template on<Device>(filled<float>({20}, seed + 10 * step + 1))};
    opt.apply_gradients(grads, m.variables());
  }
}

}  // namespace

TEST_CASE("cuda checkpoint: device model and Adam slots save and restore exactly, and match the cpu's file") {
  scratch_dir dir;
  two_layer<fx::cuda> dev(1);
  two_layer<fx::cpu> host(1);
  fx::optim::adam dev_opt{1e-2}, host_opt{1e-2};
  fx::variable<double, fx::cuda> scale(fx::to<fx::cuda>(filled<double>({3}, 5)), "scale");
  train(dev, dev_opt, 100);
  train(host, host_opt, 100);

  fx::checkpoint ckpt{{"model", dev}, {"optimizer", dev_opt}, {"scale", scale}};
  const std::string path = ckpt.save(dir.file("device"));
  const auto file = fx::io::safetensors::load(path);
  // The file holds the device's values under the cpu's names: the same model and optimizer on the
  // cpu write the same names, and values within float tolerance (device and cpu arithmetic).
  fx::checkpoint host_ckpt{{"model", host}, {"optimizer", host_opt}};
  const auto host_file = host_ckpt.to_safetensors();
  for (const std::string name : {"model/dense/kernel", "model/dense/bias", "optimizer/dense/kernel/momentum",
                                 "optimizer/dense/kernel/velocity", "optimizer/dense/bias/velocity", "optimizer/iterations",
                                 "optimizer/learning_rate"}) {
    CAPTURE(name);
    REQUIRE(file.contains(name));
    REQUIRE(host_file.contains(name));
  }
  CHECK(file.contains("scale"));
  fluxion_test::check_values(file.get<float>("model/dense/kernel").to_vector(),
                             host_values(host.kernel), 1e-5);
  fluxion_test::check_values(file.get<float>("optimizer/dense/kernel/velocity").to_vector(),
                             host_file.get<float>("optimizer/dense/kernel/velocity").to_vector(), 1e-5);

  // A fresh program: new device variables, an optimizer without slots; restore, then one more step
  // on both must give the same values bit for bit.
  two_layer<fx::cuda> again(7);
  fx::optim::adam again_opt{1e-2};
  fx::variable<double, fx::cuda> again_scale(fx::to<fx::cuda>(filled<double>({3}, 9)), "scale");
  fx::checkpoint restore{{"model", again}, {"optimizer", again_opt}, {"scale", again_scale}};
  restore.restore(path);
  CHECK(host_values(again.kernel) == host_values(dev.kernel));
  CHECK(host_values(again.bias) == host_values(dev.bias));
  CHECK(fx::to<fx::cpu>(again_scale.peek()).to_vector() == fx::to<fx::cpu>(scale.peek()).to_vector());
  CHECK(again_opt.iterations() == 2);
  train(dev, dev_opt, 500);
  train(again, again_opt, 500);
  CHECK(host_values(again.kernel) == host_values(dev.kernel));
  CHECK(host_values(again.bias) == host_values(dev.bias));
}

TEST_CASE("cuda checkpoint: a GPU run restores on the cpu, and a cpu run on the GPU") {
  scratch_dir dir;
  two_layer<fx::cuda> dev(1);
  fx::optim::adam dev_opt{1e-2};
  train(dev, dev_opt, 100);
  fx::checkpoint{{"model", dev}, {"optimizer", dev_opt}}.save(dir.file("from_device"));

  two_layer<fx::cpu> host(3);
  fx::optim::adam host_opt{1e-2};
  fx::checkpoint{{"model", host}, {"optimizer", host_opt}}.restore(dir.file("from_device"));
  CHECK(host_values(host.kernel) == host_values(dev.kernel));
  CHECK(host_opt.iterations() == 2);
  const auto* m = host_opt.get_slot(host.kernel, "momentum");
  const auto* dm = dev_opt.get_slot(dev.kernel, "momentum");
  REQUIRE(m != nullptr);
  REQUIRE(dm != nullptr);
  CHECK(m->peek().to_vector() == fx::to<fx::cpu>(dm->peek()).to_vector());

  train(host, host_opt, 300);
  fx::checkpoint{{"model", host}, {"optimizer", host_opt}}.save(dir.file("from_cpu"));
  two_layer<fx::cuda> back(4);
  fx::optim::adam back_opt{1e-2};
  fx::checkpoint{{"model", back}, {"optimizer", back_opt}}.restore(dir.file("from_cpu"));
  CHECK(host_values(back.kernel) == host_values(host.kernel));
  CHECK(host_values(back.bias) == host_values(host.bias));
  CHECK(back_opt.iterations() == 4);
}

TEST_CASE("cuda checkpoint: a mismatched file is refused by name and the device variables keep their values") {
  scratch_dir dir;
  fx::variable<float, fx::cuda> w(fx::to<fx::cuda>(filled<float>({4, 5}, 1)), "w");
  fx::checkpoint{{"w", w}}.save(dir.file("w"));
  fx::variable<float, fx::cuda> other(fx::to<fx::cuda>(filled<float>({5, 4}, 2)), "w");
  const auto before = fx::to<fx::cpu>(other.peek()).to_vector();
  fx::checkpoint restore{{"w", other}};
  CHECK_THROWS_WITH_AS(restore.restore(dir.file("w")),
                       doctest::Contains("'w' has shape (4, 5) in the file, (5, 4) in the variable"), fx::io_error);
  CHECK(fx::to<fx::cpu>(other.peek()).to_vector() == before);
}
