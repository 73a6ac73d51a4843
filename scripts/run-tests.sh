#!/usr/bin/env bash
# Installs dependencies, builds fluxion's tests and examples (Release, in build/), and runs them all.
#   scripts/run-tests.sh [extra ctest arguments, e.g. -R core -L unit]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

./scripts/install-deps.sh
require_free_space 3000  # a cold build/ of the tests and examples holds about 2.4 GiB
# Test oracles from PyPI (read-back of TensorBoard event files and safetensors checkpoints). Tests
# that need them print "skipped: ..." where Python or the packages are missing.
if command -v python3 >/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check --timeout 20 --retries 1 tensorboard safetensors numpy >/dev/null 2>&1 ||
    echo "run-tests.sh: could not install tensorboard, safetensors and numpy with pip; their read-back tests will be skipped"
fi
configure -DFLUXION_BUILD_TESTS=ON -DFLUXION_BUILD_EXAMPLES=ON -DFLUXION_BUILD_BENCHMARKS=OFF
cmake --build "$build_dir" --parallel "$jobs"
ctest --test-dir "$build_dir" --output-on-failure --parallel "$jobs" "$@"
