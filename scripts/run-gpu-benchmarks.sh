#!/usr/bin/env bash
# Builds the GPU benchmarks (bench/cuda/*.bench.cu) with nvcc and runs them on the GPU.
#   scripts/run-gpu-benchmarks.sh           build, then run (needs nvcc, Google Benchmark and a GPU)
#   scripts/run-gpu-benchmarks.sh build     build only: on a machine with nvcc and no GPU; Google
#                                           Benchmark's shared library is copied beside the binaries
#   scripts/run-gpu-benchmarks.sh run [benchmark arguments]
#                                           run what `build` made, on the GPU machine
# FLUXION_GPU_ARCH (default 90: Hopper) and FLUXION_GPU_BUILD_DIR (default build-gpu) as in
# run-gpu-tests.sh. Results are ratios against the device's own ceilings measured in the same run.
#
# A/B runs: with FLUXION_GPU_BASELINE=<git revision>, `build` also builds that revision's
# benchmarks (from a git worktree) into build-gpu/baseline, and `run` then runs each benchmark
# binary twice, alternating with its baseline (B A B A), so that one call on a lent GPU compares
# a change with what came before it on the same machine instance. E.g.
#   FLUXION_GPU_BASELINE=40c76bc scripts/run-gpu-benchmarks.sh build
#   scripts/run-gpu-benchmarks.sh run --benchmark_filter='cnn' --benchmark_repetitions=3
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

mode=${1:-all}
[[ $# -gt 0 ]] && shift
arch=${FLUXION_GPU_ARCH:-90}
out=${FLUXION_GPU_BUILD_DIR:-build-gpu}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}

# build_from SOURCE_ROOT DEST RPATH: every SOURCE_ROOT/bench/cuda/*.bench.cu to DEST/bench_<name>.
build_from() {
  local root=$1 dest=$2 rpath=$3 flags=() libs=()
  cudnn_flags flags libs
  mkdir -p "$dest"
  for source in "$root"/bench/cuda/*.bench.cu; do
    local name; name=$(basename "$source" .bench.cu)
    "$nvcc" -std=c++20 --extended-lambda --expt-relaxed-constexpr "-gencode=arch=compute_${arch},code=sm_${arch}" \
      -O3 -DNDEBUG "-I$root/include" "${flags[@]}" "$source" -o "$dest/bench_$name" -lbenchmark -lbenchmark_main \
      -lcublas "${libs[@]}" -lpthread \
      -Xlinker -rpath -Xlinker "$rpath"
  done
}

build() {
  [[ -x "$nvcc" ]] || { echo "run-gpu-benchmarks.sh: nvcc not found (set NVCC)" >&2; exit 1; }
  mkdir -p "$out/lib"
  local lib
  lib=$(ldconfig -p | awk '/libbenchmark\.so\.[0-9]/ && !found {print $NF; found = 1}')
  [[ -n "$lib" ]] || { echo "run-gpu-benchmarks.sh: Google Benchmark not found (scripts/install-deps.sh)" >&2; exit 1; }
  cp -L "$lib" "$out/lib/"
  build_from . "$out" '$ORIGIN/lib'
  rm -rf "$out/baseline"
  if [[ -n "${FLUXION_GPU_BASELINE:-}" ]]; then
    local rev tree
    rev=$(git rev-parse --short "${FLUXION_GPU_BASELINE}^{commit}") ||
      { echo "run-gpu-benchmarks.sh: FLUXION_GPU_BASELINE=$FLUXION_GPU_BASELINE is not a commit" >&2; exit 1; }
    tree=$(mktemp -d)
    git worktree add --detach "$tree" "$rev" >/dev/null
    build_from "$tree" "$out/baseline" '$ORIGIN/../lib' || { git worktree remove --force "$tree"; exit 1; }
    git worktree remove --force "$tree"
    echo "$rev" > "$out/baseline/REV"
    echo "run-gpu-benchmarks.sh: baseline $rev built into $out/baseline"
  fi
}

# bounded BINARY ARGS...: one benchmark program, stopped after FLUXION_GPU_BENCH_TIMEOUT seconds
# (default 300); the other programs still run.
bounded() { run_limited "${FLUXION_GPU_BENCH_TIMEOUT:-300}" "$@" || true; }

run() {
  cudnn_library_path
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  for binary in "$out"/bench_*; do
    local base="$out/baseline/$(basename "$binary")"
    if [[ -x "$base" ]]; then  # B A B A: the baseline first, then this build, twice
      local rev; rev=$(cat "$out/baseline/REV")
      for round in 1 2; do
        echo "=== $(basename "$binary"), baseline $rev, round $round"
        bounded "$base" "$@"
        echo "=== $(basename "$binary"), this build, round $round"
        bounded "$binary" "$@"
      done
    else
      bounded "$binary" "$@"
    fi
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
