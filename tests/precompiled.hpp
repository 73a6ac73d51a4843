// The tests' precompiled header (cmake/tests.cmake): what every test that includes
// <fluxion/tensor.hpp> parses anyway, the standard headers and xsimd that its headers include, plus
// doctest. Parsing them once per group of tests with the same flags, instead of once per test,
// saves about 2 s of each test's compile (stop 25, bench/RESULTS-compile.md). It holds no fluxion
// header: each test still parses fluxion's own headers as a user's program does, with its own
// FLUXION_* macros. Keep this list to what <fluxion/tensor.hpp> includes, so a fluxion header that
// forgets a standard include still fails to compile where it did before.
#pragma once

#include <algorithm>
#include <any>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <numbers>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fluxion/backend/cpu/detail/xsimd.hpp>  // xsimd, without g++ 12's false AVX-512 warnings

#ifndef FLUXION_PRECOMPILED_FRONT_END
#include <doctest/doctest.h>
#endif
