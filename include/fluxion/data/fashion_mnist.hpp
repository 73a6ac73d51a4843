// fx::datasets::fashion_mnist: Zalando's Fashion-MNIST (60000 training and 10000 test images of
// 28x28 clothing, 10 classes) from Debian's package dataset-fashion-mnist.
//
//   auto train = fx::datasets::fashion_mnist("train").shuffle(10000, 42).batch(64).prefetch(2);
//   for (auto [images, labels] : train) { ... }   // (64, 28, 28, 1) float in [0, 1], (64,) int32
//
// Elements are std::tuple{image, label}: a float tensor (28, 28, 1) in [0, 1] and an int32 scalar,
// as idx_images and idx_labels give them. The directory is the `dir` argument when given, else
// $FLUXION_DATASETS_DIR/fashion-mnist or $FLUXION_DATASETS_DIR itself when that variable is set,
// else /usr/share/datasets/fashion-mnist. The files are train-images-idx3-ubyte.gz,
// train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz (or the same
// names without .gz). When they are absent, fluxion::io_error says which paths were tried and to
// run `apt-get install dataset-fashion-mnist`. Reading .gz files needs fluxion::zlib.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "../core/error.hpp"
#include "../io/file.hpp"
#include "idx.hpp"

namespace fluxion::datasets {

/// The Fashion-MNIST split "train" (60000) or "test" (10000), from `dir` or the default places.
inline data::dataset<std::tuple<tensor<float>, tensor<std::int32_t>>> fashion_mnist(const std::string& split,
                                                                                  const std::string& dir = "") {
  if (split != "train" && split != "test")
    throw invalid_argument("fashion_mnist: split must be \"train\" or \"test\", got \"" + split + "\"");
  std::vector<std::string> dirs;
  if (!dir.empty()) {
    dirs.push_back(dir);
  } else if (const char* env = std::getenv("FLUXION_DATASETS_DIR"); env && *env) {
    dirs.push_back(io::detail::join_path(env, "fashion-mnist"));
    dirs.push_back(env);
  } else {
    dirs.push_back("/usr/share/datasets/fashion-mnist");
  }
  const std::string prefix = split == "train" ? "train" : "t10k";
  std::string tried;
  for (const auto& d : dirs)
    for (const char* ext : {".gz", ""}) {
      const std::string images = io::detail::join_path(d, prefix + "-images-idx3-ubyte" + ext);
      const std::string labels = io::detail::join_path(d, prefix + "-labels-idx1-ubyte" + ext);
      if (io::detail::stat_path(images).kind == io::detail::file_kind::regular &&
          io::detail::stat_path(labels).kind == io::detail::file_kind::regular) {
        const auto x = data::idx_images(images);
        const auto y = data::idx_labels(labels);
        if (x.cardinality() != y.cardinality())
          throw io_error("fashion_mnist: '" + images + "' has " + std::to_string(x.cardinality()) +
                         " images but '" + labels + "' has " + std::to_string(y.cardinality()) + " labels");
        return x.zip(y);
      }
      tried += "\n  " + images + " and " + labels;
    }
  throw io_error("fashion_mnist: the " + split + " files of Fashion-MNIST were not found; tried" + tried +
                 "\nInstall Debian's package with `apt-get install dataset-fashion-mnist` (or "
                 "scripts/install-deps.sh), or set FLUXION_DATASETS_DIR, or pass the directory");
}

}  // namespace fluxion::datasets
