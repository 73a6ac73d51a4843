// fx::datasets::fashion_mnist: the real files of Debian's dataset-fashion-mnist when installed
// (first label 9, first image's byte sum 76247 and pixel (14, 14) = 217, read with Python's gzip),
// and the message that says what to install when they are absent.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <fluxion/data.hpp>

#include "util.hpp"

using namespace data_test;

namespace {
const char* const debian_dir = "/usr/share/datasets/fashion-mnist";
bool installed() { return std::filesystem::exists(std::string(debian_dir) + "/train-images-idx3-ubyte.gz"); }
}  // namespace

TEST_CASE("fashion_mnist: the real training and test files") {
  if (!installed()) {
    MESSAGE("skipped: Debian's dataset-fashion-mnist is not installed (apt-get install dataset-fashion-mnist)");
    return;
  }
  if (!fx::data::has_zlib) {
    MESSAGE("skipped: built without zlib (fluxion::zlib), and the Debian files are .gz");
    return;
  }
  ::unsetenv("FLUXION_DATASETS_DIR");
  auto train = fx::datasets::fashion_mnist("train");
  CHECK(train.cardinality() == 60000);
  CHECK(fx::datasets::fashion_mnist("test").cardinality() == 10000);
  auto it = train.open();
  auto first = it.next();
  REQUIRE(first);
  auto& [image, label] = *first;
  CHECK(image.shape() == fx::shape{28, 28, 1});
  CHECK(label.shape() == fx::shape{});
  CHECK(label.data()[0] == 9);
  double sum = 0;
  for (float v : image.to_vector()) sum += v;
  CHECK(std::round(sum * 255) == 76247);
  CHECK(image.data()[14 * 28 + 14] == doctest::Approx(217 / 255.0));
  // The whole test split, batched: 10 batches of 1000, labels in [0, 10).
  int batches = 0, labels = 0;
  for (auto [x, y] : fx::datasets::fashion_mnist("test", debian_dir).batch(1000)) {
    CHECK(x.shape() == fx::shape{1000, 28, 28, 1});
    for (auto l : y.to_vector()) labels += (l >= 0 && l < 10);
    ++batches;
  }
  CHECK(batches == 10);
  CHECK(labels == 10000);
}

TEST_CASE("fashion_mnist: absent files say which package to install and which paths were tried") {
  scratch_dir dir;
  ::setenv("FLUXION_DATASETS_DIR", dir.path.c_str(), 1);
  const std::string message = io_error_of([] { fx::datasets::fashion_mnist("train"); });
  ::unsetenv("FLUXION_DATASETS_DIR");
  check_contains(message, {"fashion_mnist: the train files of Fashion-MNIST were not found",
                           (dir.path / "fashion-mnist" / "train-images-idx3-ubyte.gz").string(),
                           (dir.path / "train-labels-idx1-ubyte").string(), "apt-get install dataset-fashion-mnist"});
  check_contains(io_error_of([&] { fx::datasets::fashion_mnist("test", dir.file("nowhere")); }),
                 {"t10k-images-idx3-ubyte.gz", "nowhere"});
  CHECK_THROWS_WITH_AS(fx::datasets::fashion_mnist("validation"), doctest::Contains("split must be \"train\" or \"test\""),
                       fx::invalid_argument);
}
