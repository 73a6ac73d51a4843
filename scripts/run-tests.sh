#!/usr/bin/env bash
# Installs dependencies, builds fluxion's tests and examples (Release, in build/), and runs them all.
#   scripts/run-tests.sh [extra ctest arguments, e.g. -R core -L unit]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

./scripts/install-deps.sh
configure -DFLUXION_BUILD_TESTS=ON -DFLUXION_BUILD_EXAMPLES=ON -DFLUXION_BUILD_BENCHMARKS=OFF
cmake --build "$build_dir" --parallel "$jobs"
ctest --test-dir "$build_dir" --output-on-failure --parallel "$jobs" "$@"
