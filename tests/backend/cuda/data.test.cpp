// fx::data pipelines that deliver their elements on fx::cuda: prefetch_to<fx::cuda>(n) uploads each
// element's tensors in the producer, and the consumer gets the same values, in the same order, as
// the host pipeline's, ready for device statements.
#include <doctest/doctest.h>

#include <cstdint>
#include <mutex>
#include <numeric>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "fluxion/data.hpp"
#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
using fluxion_test::filled;

/// 40 images of 3 x 2 and their labels 0..39, as an in-memory dataset of (image, label) tuples.
auto images_and_labels() {
  std::vector<std::int32_t> labels(40);
  std::iota(labels.begin(), labels.end(), 0);
  return fx::data::tensors(filled<float>({40, 3, 2}, 7), fx::from_vector(labels, {40}));
}

}  // namespace

TEST_CASE("cuda data: prefetch_to<cuda> delivers the host pipeline's batches on the device, in order") {
  const auto host = images_and_labels().shuffle(40, 3).batch(6);
  const auto device = images_and_labels().shuffle(40, 3).batch(6).prefetch_to<fx::cuda>(2);
  static_assert(std::is_same_v<decltype(device)::element_type,
                               std::tuple<fx::tensor<float, fx::cuda>, fx::tensor<std::int32_t, fx::cuda>>>);
  CHECK(device.cardinality() == host.cardinality());
  auto h = host.open();
  auto d = device.open();
  int batches = 0;
  while (auto expected = h.next()) {
    auto got = d.next();
    REQUIRE(got);
    const auto& [x, y] = *got;
    CHECK(x.shape() == std::get<0>(*expected).shape());
    CHECK(fx::to<fx::cpu>(x).to_vector() == std::get<0>(*expected).to_vector());
    CHECK(fx::to<fx::cpu>(y).to_vector() == std::get<1>(*expected).to_vector());
    // A device statement on the delivered batch, against the host's.
    fx::tensor<float, fx::cuda> s = fx::reduce_sum(x * 2.f, 1);
    fluxion_test::check_values(fx::to<fx::cpu>(s).to_vector(),
                               fx::tensor<float>(fx::reduce_sum(std::get<0>(*expected) * 2.f, 1)).to_vector(), 1e-6);
    ++batches;
  }
  CHECK(batches == 7);
  CHECK(!d.next());
}

TEST_CASE("cuda data: prefetch_to<cuda> on single tensors and pairs; other values pass as they are; errors come through") {
  auto singles = fx::data::tensors(filled<double>({5, 4}, 1)).prefetch_to<fx::cuda>(3);
  static_assert(std::is_same_v<decltype(singles)::element_type, fx::tensor<double, fx::cuda>>);
  int i = 0;
  const auto rows = filled<double>({5, 4}, 1).to_vector();
  for (const auto& row : singles) {
    const auto v = fx::to<fx::cpu>(row).to_vector();
    CHECK(v == std::vector<double>(rows.begin() + 4 * i, rows.begin() + 4 * (i + 1)));
    ++i;
  }
  CHECK(i == 5);

  auto pairs = fx::data::tensors(filled<float>({3, 2}, 2))
                   .map([](const fx::tensor<float>& t) { return std::pair{t, std::int64_t{7}}; })
                   .prefetch_to<fx::cuda>(1);
  static_assert(std::is_same_v<decltype(pairs)::element_type, std::pair<fx::tensor<float, fx::cuda>, std::int64_t>>);
  int n = 0;
  for (const auto& [t, seven] : pairs) {
    CHECK(t.shape() == fx::shape{2});
    CHECK(seven == 7);
    ++n;
  }
  CHECK(n == 3);

  auto failing = fx::data::tensors(filled<float>({6, 2}, 3)).map([](const fx::tensor<float>& t) {
    if (t.data()[0] > 10.f) throw fx::io_error("never");
    static int k = 0;
    if (++k == 4) throw fx::io_error("reader: element 3 is bad");
    return t;
  });
  auto it = failing.prefetch_to<fx::cuda>(2).open();
  for (int k = 0; k < 3; ++k) CHECK(it.next());
  CHECK_THROWS_WITH_AS(it.next(), "reader: element 3 is bad", fx::io_error);
}

TEST_CASE("cuda data: a prefetching thread makes device elements on a stream of its own; the consumer on its stream") {
  // Elements with device tensors are made inside fx::own_stream on the producing threads (the
  // upload beside the training step), and on the consumer's current stream when it makes one itself.
  using cuda_elements = decltype(fx::data::detail::element_producer<
                                 std::tuple<std::int64_t, fx::tensor<float, fx::cuda>>>())::type;
  static_assert(std::is_same_v<cuda_elements::thread_scope, fx::own_stream>);
  static_assert(std::is_same_v<decltype(fx::data::detail::element_producer<std::pair<fx::tensor<float>, int>>())::type,
                               fx::data::detail::synchronous_elements>);
  const auto consumer = std::this_thread::get_id();
  std::mutex seen_mutex;
  std::vector<std::pair<std::thread::id, std::uint32_t>> seen;  // the thread, its stream
  auto uploaded = fx::data::tensors(filled<float>({64, 3}, 4))
                      .map([&](const fx::tensor<float>& t) {
                        std::lock_guard<std::mutex> lk(seen_mutex);
                        seen.emplace_back(std::this_thread::get_id(), fx::detail::current_stream_id());
                        return t;
                      })
                      .batch(4)
                      .prefetch_to<fx::cuda>(2);
  const auto rows = filled<float>({64, 3}, 4).to_vector();
  std::size_t at = 0;
  for (const auto& b : uploaded) {
    const auto v = fx::to<fx::cpu>(b).to_vector();
    CHECK(v == std::vector<float>(rows.begin() + static_cast<std::ptrdiff_t>(at), rows.begin() + static_cast<std::ptrdiff_t>(at + v.size())));
    at += v.size();
    CHECK(fx::detail::current_stream_id() == fx::detail::shared_stream_id);  // the consumer's scope is its own
  }
  CHECK(at == rows.size());
  REQUIRE(seen.size() == 64);
  int by_producers = 0;
  for (const auto& [thread, stream] : seen) {
    if (thread == consumer) {
      CHECK(stream == fx::detail::shared_stream_id);
    } else {
      CHECK(stream != fx::detail::shared_stream_id);
      ++by_producers;
    }
  }
  MESSAGE(by_producers << " of 64 rows were made on producing threads");
}
