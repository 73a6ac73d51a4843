// fx::distributed::communicator under mpiexec (ctest runs two processes): all_reduce, broadcast of
// tensors and of variables against values computed by hand from every process's inputs, and the
// check that the processes agree on what they exchange (each process throws the same error, naming
// every process's side, instead of exchanging buffers of different sizes).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <fluxion/distributed.hpp>
#include <fluxion/fluxion.hpp>

namespace fx = fluxion;

namespace {

const fx::distributed::communicator& world() {
  static fx::distributed::communicator comm;
  return comm;
}

}  // namespace

TEST_CASE("communicator: the job's processes") {
  const auto& comm = world();
  CHECK(comm.size() >= 1);
  CHECK(comm.rank() >= 0);
  CHECK(comm.rank() < comm.size());
  comm.barrier();
}

TEST_CASE("all_reduce: sum, mean, max and min of every process's tensor, against the values by hand") {
  const auto& comm = world();
  const int n = comm.size();
  const double r = comm.rank();
  // Process r holds {r + 1, -2 (r + 1), r * r}.
  const fx::tensor<double> t = {r + 1, -2 * (r + 1), r * r};
  std::vector<double> sum(3, 0), max(3, -1e300), min(3, 1e300);
  for (int q = 0; q < n; ++q) {
    const std::vector<double> v{q + 1.0, -2.0 * (q + 1), 1.0 * q * q};
    for (int i = 0; i < 3; ++i) {
      sum[i] += v[i];
      max[i] = std::max(max[i], v[i]);
      min[i] = std::min(min[i], v[i]);
    }
  }
  CHECK(comm.all_reduce(t).to_vector() == sum);
  CHECK(comm.all_reduce(t, fx::distributed::reduction::max).to_vector() == max);
  CHECK(comm.all_reduce(t, fx::distributed::reduction::min).to_vector() == min);
  const auto mean = comm.all_reduce(t, fx::distributed::reduction::mean).to_vector();
  for (int i = 0; i < 3; ++i) CHECK(mean[i] == doctest::Approx(sum[i] / n));
  CHECK(t.to_vector() == std::vector<double>{r + 1, -2 * (r + 1), r * r});  // the operand is unchanged
  // Shapes of any rank, float and integers, and a double.
  const fx::tensor<float> m = {{1.f, 2.f}, {3.f, static_cast<float>(comm.rank())}};
  const auto ms = comm.all_reduce(m);
  CHECK(ms.shape() == fx::shape{2, 2});
  CHECK(ms.to_vector() == std::vector<float>{1.f * n, 2.f * n, 3.f * n, static_cast<float>(n * (n - 1) / 2)});
  CHECK(comm.all_reduce(fx::tensor<std::int64_t>{comm.rank() + 1}).to_vector() == std::vector<std::int64_t>{n * (n + 1) / 2});
  CHECK(comm.all_reduce(fx::tensor<std::int32_t>{7}, fx::distributed::reduction::mean).to_vector() == std::vector<std::int32_t>{7});
  CHECK(comm.all_reduce(r, fx::distributed::reduction::max) == n - 1);
}

TEST_CASE("broadcast: a tensor and a model's variables from one process") {
  const auto& comm = world();
  const int root = comm.size() - 1;
  const fx::tensor<float> t = {static_cast<float>(comm.rank()), 10.f};
  CHECK(comm.broadcast(t, root).to_vector() == std::vector<float>{static_cast<float>(root), 10.f});
  // Every process starts a model from its own seed; after the broadcast every one holds root's.
  auto make = [](std::uint64_t seed) {
    fx::random::generator gen{seed};
    return fx::nn::sequential(gen, fx::nn::input<3>{}, fx::nn::dense<4>{}, fx::nn::relu{}, fx::nn::dense<2>{});
  };
  auto net = make(100 + static_cast<std::uint64_t>(comm.rank()));
  auto roots = make(100 + static_cast<std::uint64_t>(root));
  comm.broadcast(net.variables(), root);
  const auto mine = net.variables();
  const auto expected = roots.variables();
  REQUIRE(mine.size() == expected.size());
  for (std::size_t i = 0; i < mine.size(); ++i) CHECK(mine[i]->peek().to_vector() == expected[i]->peek().to_vector());
}

TEST_CASE("collectives refuse what the processes disagree on, on every process alike") {
  const auto& comm = world();
  CHECK_THROWS_WITH_AS(comm.broadcast(fx::tensor<float>{1.f}, comm.size()),
                       ("distributed::broadcast: root = " + std::to_string(comm.size()) + " is not in [0, " +
                        std::to_string(comm.size()) + ")").c_str(),
                       fx::out_of_range);
  CHECK_THROWS_WITH_AS(comm.all_reduce(fx::tensor<float>::none()),
                       "distributed::all_reduce: the tensor is none (a gradient that does not exist)", fx::invalid_argument);
  if (comm.size() < 2) return;
  // Process r's tensor has r + 1 elements: every process throws, naming each one's shape.
  const auto t = fx::zeros<float>({comm.rank() + 1});
  std::string expected = "distributed::all_reduce: the processes disagree on what to exchange:";
  for (int q = 0; q < comm.size(); ++q)
    expected += std::string(q == 0 ? " " : "; ") + "process " + std::to_string(q) + ": a sum of float32 (" + std::to_string(q + 1) + ",)";
  CHECK_THROWS_WITH_AS(comm.all_reduce(t), expected.c_str(), fx::invalid_argument);
  // The element type and the reduction count too.
  if (comm.rank() == 0) CHECK_THROWS_AS(comm.all_reduce(fx::tensor<double>{1.0}), fx::invalid_argument);
  else CHECK_THROWS_AS(comm.all_reduce(fx::tensor<float>{1.f}), fx::invalid_argument);
  const auto op = comm.rank() == 0 ? fx::distributed::reduction::sum : fx::distributed::reduction::max;
  CHECK_THROWS_AS(comm.all_reduce(fx::tensor<float>{1.f}, op), fx::invalid_argument);
  // Variables of different shapes.
  fx::variable<float> v{fx::zeros<float>({comm.rank() + 2})};
  CHECK_THROWS_AS(comm.broadcast(std::vector<fx::variable<float>*>{&v}), fx::invalid_argument);
  CHECK(v.peek().to_vector() == std::vector<float>(static_cast<std::size_t>(comm.rank() + 2), 0.f));  // unchanged
  // And the processes are still in step afterwards.
  CHECK(comm.all_reduce(fx::tensor<float>{1.f}).to_vector() == std::vector<float>{static_cast<float>(comm.size())});
}
