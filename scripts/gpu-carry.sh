#!/usr/bin/env bash
# One call on a lent GPU (the device tool): what run-gpu-tests.sh and run-gpu-benchmarks.sh built
# here, packed to travel, and the script that runs it there.
#   scripts/gpu-carry.sh pack     here, after `scripts/run-gpu-tests.sh build` and
#                                 `[FLUXION_GPU_BASELINE=<rev>] scripts/run-gpu-benchmarks.sh build`:
#                                 build-gpu/ and the Fashion-MNIST files into .carry/gpu.tar.xz
#                                 (59 MB with a baseline, stripped; the tool carries at most 64 MiB), with the commit
#                                 the binaries were built from in .carry/REV
#   scripts/gpu-carry.sh call [benchmark arguments]
#                                 there (the device tool's `run`, with carry [".carry"]): unpacks,
#                                 runs the device test suites and the example, PyTorch's steps
#                                 (bench/cuda/torch_peer.py), then the benchmarks (A/B against the
#                                 baseline when one was built; PyTorch's steps again at their end)
#                                 with these arguments (default: the repetitions in
#                                 docs/benchmarks.md's GPU section); the
#                                 logs go to $OUT (tests.log, torch_before.log, bench.log), a
#                                 summary of the tests to stdout. FLUXION_GPU_TORCH_BEFORE=0 skips
#                                 PyTorch's first run; FLUXION_GPU_PROFILE=1 adds Nsight Compute
#                                 over the batch-256 CNN step (ncu_cnn256.csv), PyTorch's profile
#                                 of the same step (bench/cuda/torch_profile.py) and memcheck over
#                                 the suites in FLUXION_GPU_MEMCHECK (default: sort checks)
# .carry stays out of git (`pack` adds it to .git/info/exclude). Before a call, check that .carry/REV
# is the commit whose code you mean to measure (`git diff --stat $(cat .carry/REV) -- include
# tests bench examples` shows what the binaries lack).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

mode=${1:-}
[[ $# -gt 0 ]] && shift
out=${FLUXION_GPU_BUILD_DIR:-build-gpu}
data=${FLUXION_DATASETS_DIR:-/usr/share/datasets}/fashion-mnist

case "$mode" in
  pack)
    [[ -x "$out/fashion_mnist_cnn" && -x "$out/bench_train" ]] ||
      { echo "gpu-carry.sh: build first (run-gpu-tests.sh build, run-gpu-benchmarks.sh build)" >&2; exit 1; }
    mkdir -p .carry
    mkdir -p "$(git rev-parse --git-dir)/info"
    grep -qx "/.carry/" "$(git rev-parse --git-dir)/info/exclude" 2>/dev/null || echo "/.carry/" >> "$(git rev-parse --git-dir)/info/exclude"
    # The binaries' host symbol tables are a tenth of the archive and no use on the device machine
    # (the device code, .nv_fatbin, is an allocated section and stays).
    find "$out" -type f -perm -u+x ! -name '*.so*' -exec strip --strip-unneeded {} +
    files=("$out")
    [[ -d "$data" ]] && files+=("$data")  # travels as datasets/fashion-mnist
    tar -cf - --transform "s|^${data#/}|datasets/fashion-mnist|" "${files[@]}" 2>/dev/null | xz -9 -T2 > .carry/gpu.tar.xz
    git rev-parse --short HEAD > .carry/REV
    git diff --quiet HEAD -- include tests bench examples || echo "dirty" >> .carry/REV
    ls -la .carry
    # The device tool carries the working tree (tracked and untracked files git does not ignore)
    # and .carry, 64 MiB in all.
    local_bytes=$(git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
    carry_bytes=$(du -cb .carry | tail -1 | cut -f1)
    total=$(( (local_bytes + carry_bytes) / 1048576 ))
    echo "gpu-carry.sh: the working tree and .carry come to $total MiB of the device tool's 64"
    (( local_bytes + carry_bytes < 64 * 1048576 )) ||
      { echo "gpu-carry.sh: over the device tool's 64 MiB: build fewer suites, or leave out the baseline or the data set" >&2; exit 1; }
    ;;
  call)
    [[ -e .carry/gpu.tar.xz ]] || { echo "gpu-carry.sh: no .carry/gpu.tar.xz (pack it here first)" >&2; exit 1; }
    echo "gpu-carry.sh: binaries of $(head -1 .carry/REV)"
    rm -rf "$out"
    xz -dc .carry/gpu.tar.xz | tar -xf -
    [[ -d datasets/fashion-mnist ]] && export FLUXION_DATASETS_DIR=$PWD/datasets
    dest=${OUT:-/tmp}
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
    stamp() { echo "=== gpu-carry.sh: $* ($((SECONDS - started)) s)"; }
    started=$SECONDS
    scripts/run-gpu-tests.sh run > "$dest/tests.log" 2>&1 || true
    grep -E "^==|test cases|assertions|FAILED|passed|ran past|samples/s|accuracy" "$dest/tests.log" || true
    stamp "tests"
    [[ "${FLUXION_GPU_TORCH_BEFORE:-1}" == 1 ]] && { python3 bench/cuda/torch_peer.py > "$dest/torch_before.log" 2>&1 || true; }
    args=("$@")
    (( ${#args[@]} )) || args=(--benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
    scripts/run-gpu-benchmarks.sh run "${args[@]}" > "$dest/bench.log" 2>&1 || true  # PyTorch again at its end
    stamp "benchmarks"
    if [[ "${FLUXION_GPU_PROFILE:-0}" == 1 ]]; then
      # Where the batch-256 CNN step's time goes: Nsight Compute's duration of each kernel over
      # 150 launches after the first 400 (im2col alone, so that the profiler's cost per launch
      # does not change cuDNN's timed routes), PyTorch's kernels for the same step, and
      # compute-sanitizer's memcheck over two suites of new kernels.
      cudnn_library_path
      ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
      [[ -n "$ncu" ]] && { timeout 90 "$ncu" --metrics gpu__time_duration.sum --cache-control none --clock-control none \
        --launch-skip 400 --launch-count 150 --csv "$out/bench_train" \
        --benchmark_filter='^cnn_train_nn/256/0/manual_time' --benchmark_min_time=0.01 \
        > "$dest/ncu_cnn256.csv" 2> "$dest/ncu.err" || tail -3 "$dest/ncu.err"; }
      timeout 60 python3 bench/cuda/torch_profile.py 256 > "$dest/torch_profile.txt" 2>&1 || true
      for suite in ${FLUXION_GPU_MEMCHECK:-sort checks}; do
        rc=0
        timeout 30 compute-sanitizer --tool memcheck --leak-check no "$out/$suite" > "$dest/memcheck_$suite.log" 2>&1 || rc=$?
        echo "memcheck $suite: exit $rc"; tail -3 "$dest/memcheck_$suite.log"
      done
      stamp "profiles"
    fi
    ;;
  *)
    echo "gpu-carry.sh: expected pack or call" >&2
    exit 2
    ;;
esac
