#!/usr/bin/env bash
# Builds the unit tests with AddressSanitizer and UndefinedBehaviorSanitizer (in build-sanitize/)
# and runs them. Not part of CI: the whole suite takes about three times as long as run-tests.sh.
#   scripts/run-sanitizers.sh                     # every unit test
#   scripts/run-sanitizers.sh -R '^(io|data)\.'   # a subset (extra ctest arguments)
# Any sanitizer report fails the test that triggered it (halt_on_error, no recovery from UBSan).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

./scripts/install-deps.sh
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# Ninja where it is installed (for a new build-sanitize/ only: CMake keeps a folder's generator):
# it builds a list of targets in parallel, where the Makefile generator builds them one at a time.
generator=()
if command -v ninja >/dev/null && [[ ! -e build-sanitize/CMakeCache.txt ]]; then
  generator=(-G Ninja)
fi
cmake "${generator[@]}" -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Release -DFLUXION_BUILD_TESTS=ON -DFLUXION_BUILD_EXAMPLES=OFF \
  -DFLUXION_BUILD_BENCHMARKS=OFF -DFLUXION_NVCC_TESTS=OFF \
  "-DCMAKE_CXX_FLAGS=$sanitize" "-DCMAKE_EXE_LINKER_FLAGS=$sanitize"
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if [[ $# -gt 0 ]]; then
  ctest_args=("$@")
else
  ctest_args=(-L unit)
fi
# Build only the test programs that a selection runs. (The Makefile generator builds a list of
# targets one after another, each a single translation unit, so without Ninja a subset takes about
# as long as its targets' CPU time; the whole suite is built as `all`, in parallel.)
targets=""
if [[ $# -gt 0 ]]; then
  targets=$(ctest --test-dir build-sanitize -N "${ctest_args[@]}" 2>/dev/null |
    sed -n 's/^ *Test *#[0-9]*: \([a-z0-9_.]*\)$/test_\1/p' | tr '.' '_' || true)
fi
if [[ -n "$targets" ]]; then
  # shellcheck disable=SC2086
  cmake --build build-sanitize --parallel "$jobs" --target $targets
else
  cmake --build build-sanitize --parallel "$jobs"
fi
ctest --test-dir build-sanitize --output-on-failure --parallel "$jobs" "${ctest_args[@]}"
