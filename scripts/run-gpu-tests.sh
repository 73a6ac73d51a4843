#!/usr/bin/env bash
# Builds the device-generic tests (tests/backend/cuda) with nvcc for a real GPU and runs them on it.
#   scripts/run-gpu-tests.sh              build, then run (needs nvcc, the test headers and a GPU)
#   scripts/run-gpu-tests.sh build        build only: on a machine with nvcc and no GPU
#   scripts/run-gpu-tests.sh run          run what `build` made: on the GPU machine, which needs
#                                         the CUDA driver and cuBLAS, not the compiler or headers
#   scripts/run-gpu-tests.sh MODE NAME... only the suites named (tests/backend/cuda/NAME.test.cpp)
# `build` also builds examples/fashion_mnist_cnn.cpp for the GPU; `run` then trains one epoch with
# `--device cuda` where the data set is found (FLUXION_DATASETS_DIR, or Debian's
# /usr/share/datasets), and prints its test accuracy beside the suites' results.
# FLUXION_GPU_SUITE_TIMEOUT (default 120) stops a suite that runs longer, in seconds.
# FLUXION_GPU_ARCH (default 90: Hopper, H100/H200) picks the GPU architecture; FLUXION_GPU_BUILD_DIR
# (default build-gpu) where the binaries go; objects go to build-gpu-obj, so that build-gpu alone
# travels to the GPU machine. In CI the same tests run through Thrust's OpenMP
# backend (ctest: backend.cuda.*) and are compiled by nvcc (ctest: nvcc.*); only here do they run
# on a GPU.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

mode=${1:-all}
[[ $# -gt 0 ]] && shift
arch=${FLUXION_GPU_ARCH:-90}
out=${FLUXION_GPU_BUILD_DIR:-build-gpu}
obj=$out-obj  # objects apart, so that $out alone travels to the GPU machine
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
tests=(tests/backend/cuda/*.test.cpp)
if [[ $# -gt 0 ]]; then  # names given: only those suites (e.g. `build matmul reduce`)
  tests=()
  for name in "$@"; do tests+=("tests/backend/cuda/$name.test.cpp"); done
fi

build() {
  [[ -x "$nvcc" ]] || { echo "run-gpu-tests.sh: nvcc not found (set NVCC)" >&2; exit 1; }
  mkdir -p "$out" "$obj"
  local flags=(-std=c++20 -x cu --extended-lambda --expt-relaxed-constexpr -diag-error=20011,20014
               "-gencode=arch=compute_${arch},code=sm_${arch}" -O2 -Iinclude -Itests -DFLUXION_GPU_TESTS=1)
  [[ -n "${CXX:-}" ]] && flags+=(-ccbin "$CXX")
  local libs=(-lcublas)
  cudnn_flags flags libs
  "$nvcc" "${flags[@]}" -c tests/doctest_main.cpp -o "$obj/doctest_main.o"
  local pids=() names=()
  for source in "${tests[@]}"; do
    local name; name=$(basename "$source" .test.cpp)
    rm -f "$out/$name"
    local order=(-DFLUXION_MAX_DERIVATIVE_ORDER=0)  # as ctest's builds of the same tests
    grep -qx "$name" tests/backend/cuda/tape_suites.txt && order=()  # the suites with the tape's higher orders
    ( "$nvcc" "${flags[@]}" "${order[@]}" -c "$source" -o "$obj/$name.o" &&
      "$nvcc" "-gencode=arch=compute_${arch},code=sm_${arch}" "$obj/$name.o" "$obj/doctest_main.o" "${libs[@]}" \
        -o "$out/$name" ) &
    pids+=($!); names+=("$name")
    while (( $(jobs -rp | wc -l) >= jobs )); do wait -n || true; done
  done
  # The training example, on the GPU (zlib where its header is: the data set's files are .gz).
  local zlib=()
  [[ -e /usr/include/zlib.h ]] && zlib=(-DFLUXION_HAS_ZLIB)
  ( "$nvcc" "${flags[@]}" "${zlib[@]}" -c examples/fashion_mnist_cnn.cpp -o "$obj/fashion_mnist_cnn.o" &&
    "$nvcc" "-gencode=arch=compute_${arch},code=sm_${arch}" "$obj/fashion_mnist_cnn.o" "${libs[@]}" ${zlib:+-lz} \
      -o "$out/fashion_mnist_cnn" ) &
  pids+=($!); names+=("fashion_mnist_cnn")
  local failed=0
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" 2>/dev/null || true
    [[ -x "$out/${names[$i]}" ]] || { echo "run-gpu-tests.sh: ${names[$i]} did not build" >&2; failed=1; }
  done
  return $failed
}

run() {
  cudnn_library_path
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  local failed=()
  for source in "${tests[@]}"; do
    local name; name=$(basename "$source" .test.cpp)
    echo "== $name"
    # A suite that hangs on the GPU (a grid barrier that never opens) must not take the whole call.
    run_limited "${FLUXION_GPU_SUITE_TIMEOUT:-120}" "$out/$name" || failed+=("$name")
  done
  local data=${FLUXION_DATASETS_DIR:-/usr/share/datasets}/fashion-mnist
  if [[ -x "$out/fashion_mnist_cnn" && -d "$data" ]]; then
    echo "== fashion_mnist_cnn --device cuda --epochs 1"
    ( cd "$out" && run_limited "${FLUXION_GPU_SUITE_TIMEOUT:-120}" ./fashion_mnist_cnn --device cuda --epochs 1 --data "$data" ) || failed+=("fashion_mnist_cnn")
  else
    echo "== fashion_mnist_cnn: not run (no data set at $data)"
  fi
  if (( ${#failed[@]} )); then
    echo "run-gpu-tests.sh: FAILED on the GPU: ${failed[*]}" >&2
    exit 1
  fi
  echo "run-gpu-tests.sh: all ${#tests[@]} device test suites passed on the GPU"
}

case "$mode" in
  build) build ;;
  run) run ;;
  all) build && run ;;
  *) echo "run-gpu-tests.sh: unknown mode '$mode' (expected build, run or nothing)" >&2; exit 2 ;;
esac
