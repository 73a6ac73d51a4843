// Facade: input pipelines (fluxion::data) and ready-made data sets (fluxion::datasets).
//
//   #include <fluxion/data.hpp>
//   auto ds = fx::data::idx_images("train-images-idx3-ubyte.gz")
//                 .zip(fx::data::idx_labels("train-labels-idx1-ubyte.gz"))
//                 .shuffle(10000, /*seed=*/42).batch(64).prefetch(2);
//   for (auto [images, labels] : ds) { ... }      // (64, 28, 28, 1) float, (64,) int32
//   auto test = fx::datasets::fashion_mnist("test").batch(1000);
//
// Sources: idx_images, idx_labels, idx<T> (IDX, plain or .gz), csv, npy<T>, tensors / from_tensors
// (memory), tfrecord (with parse_example). Transforms: map, shuffle, batch, repeat, take, zip,
// prefetch. Reading .gz files needs zlib: link the CMake target fluxion::zlib (FLUXION_HAS_ZLIB);
// without it everything compiles, and a .gz file throws fluxion::io_error saying so. Every corrupt
// or truncated file throws fluxion::io_error naming the file, the record, line or byte offset, and
// what was expected.
#pragma once

#include "data/csv.hpp"
#include "data/dataset.hpp"
#include "data/fashion_mnist.hpp"
#include "data/idx.hpp"
#include "data/input_file.hpp"
#include "data/memory.hpp"
#include "data/tfrecord.hpp"
