#!/usr/bin/env bash
# Builds the GPU benchmarks (bench/cuda/*.bench.cu) with nvcc and runs them on the GPU.
#   scripts/run-gpu-benchmarks.sh           build, then run (needs nvcc, Google Benchmark and a GPU)
#   scripts/run-gpu-benchmarks.sh build     build only: on a machine with nvcc and no GPU; Google
#                                           Benchmark's shared library is copied beside the binaries
#   scripts/run-gpu-benchmarks.sh run [benchmark arguments]
#                                           run what `build` made, on the GPU machine
# FLUXION_GPU_ARCH (default 90: Hopper) and FLUXION_GPU_BUILD_DIR (default build-gpu) as in
# run-gpu-tests.sh. Results are ratios against the device's own ceilings measured in the same run.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

mode=${1:-all}
[[ $# -gt 0 ]] && shift
arch=${FLUXION_GPU_ARCH:-90}
out=${FLUXION_GPU_BUILD_DIR:-build-gpu}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}

build() {
  [[ -x "$nvcc" ]] || { echo "run-gpu-benchmarks.sh: nvcc not found (set NVCC)" >&2; exit 1; }
  mkdir -p "$out/lib"
  local lib
  lib=$(ldconfig -p | awk '/libbenchmark\.so\.[0-9]/ && !found {print $NF; found = 1}')
  [[ -n "$lib" ]] || { echo "run-gpu-benchmarks.sh: Google Benchmark not found (scripts/install-deps.sh)" >&2; exit 1; }
  cp -L "$lib" "$out/lib/"
  local flags=() libs=()
  cudnn_flags flags libs
  for source in bench/cuda/*.bench.cu; do
    local name; name=$(basename "$source" .bench.cu)
    "$nvcc" -std=c++20 --extended-lambda --expt-relaxed-constexpr "-gencode=arch=compute_${arch},code=sm_${arch}" \
      -O3 -DNDEBUG -Iinclude "${flags[@]}" "$source" -o "$out/bench_$name" -lbenchmark -lbenchmark_main -lcublas \
      "${libs[@]}" -lpthread \
      -Xlinker -rpath -Xlinker '$ORIGIN/lib'
  done
}

run() {
  cudnn_library_path
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  for binary in "$out"/bench_*; do
    "$binary" "$@"
  done
  # PyTorch on the same GPU, where python3 has it (the device machines' image does).
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    python3 bench/cuda/torch_peer.py
  else
    echo "run-gpu-benchmarks.sh: python3 has no CUDA-enabled torch here; the PyTorch rows are skipped"
  fi
}

case "$mode" in
  build) build ;;
  run) run "$@" ;;
  all) build && run "$@" ;;
  *) echo "run-gpu-benchmarks.sh: unknown mode '$mode' (expected build, run or nothing)" >&2; exit 2 ;;
esac
