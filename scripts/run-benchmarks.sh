#!/usr/bin/env bash
# Installs dependencies (with the peers: OpenBLAS, LibTorch), builds the benchmarks (Release, in
# build/) and runs every bench/<name>.bench.cpp.
#   scripts/run-benchmarks.sh [filter] [Google Benchmark arguments...]
# filter is a regex over benchmark names (--benchmark_filter); the other arguments pass through,
# e.g. scripts/run-benchmarks.sh gemm --benchmark_repetitions=3
# Set FLUXION_BENCH=<name> to run only build/bench/<name>. build/bench/distributed runs as two MPI
# processes (mpirun -np 2).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

args=()
if [[ $# -gt 0 && "$1" != -* ]]; then
  args+=("--benchmark_filter=$1")
  shift
fi
args+=("$@")

./scripts/install-deps.sh --bench
configure -DFLUXION_BUILD_BENCHMARKS=ON
cmake --build "$build_dir" --parallel "$jobs" --target fluxion_benchmarks

status=0
found=0
for program in "$build_dir"/bench/*; do
  [[ -f "$program" && -x "$program" ]] || continue
  [[ -z "${FLUXION_BENCH:-}" || "$(basename "$program")" == "$FLUXION_BENCH" ]] || continue
  found=1
  echo "=== $(basename "$program")"
  if [[ "$(basename "$program")" == distributed ]]; then
    # Collectives: two processes (Open MPI's flags for more processes than cores and for root).
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      mpirun --oversubscribe -np 2 "$program" "${args[@]}" || status=$?
  else
    "$program" "${args[@]}" || status=$?
  fi
done
if [[ $found -eq 0 ]]; then
  echo "run-benchmarks.sh: no benchmark was built (bench/*.bench.cpp)" >&2
  exit 1
fi
exit $status
