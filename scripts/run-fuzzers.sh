#!/usr/bin/env bash
# Builds fluxion's libFuzzer targets (fuzz/*.fuzz.cpp: the npy, IDX, TFRecord + Example and
# safetensors readers) with clang and ASan/UBSan, and runs each for a while. Not part of CI.
#   scripts/run-fuzzers.sh [seconds per target, default 600] [target names...]
# A crash leaves crash-* files in build-fuzz/<target>/; turn each into a test.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

seconds=${1:-600}
shift || true
./scripts/install-deps.sh
# clang and its runtime libraries (libFuzzer, ASan, UBSan), Debian 12's version 16.
if ! command -v clang++-16 >/dev/null || [[ ! -d /usr/lib/llvm-16/lib/clang/16/lib/linux ]]; then
  sudo=()
  [[ $(id -u) -ne 0 ]] && sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends clang-16 libclang-rt-16-dev
fi
clang=clang++-16
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in fuzz/*.fuzz.cpp; do targets+=("$(basename "$f" .fuzz.cpp)"); done
fi
status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/$t/corpus"
  "$clang" -std=c++20 -O1 -g -march=native -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -DFLUXION_HAS_ZLIB=1 -Iinclude "fuzz/$t.fuzz.cpp" -o "build-fuzz/$t/fuzz" -lz
  echo "=== $t: $seconds s"
  (cd "build-fuzz/$t" && ./fuzz -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 corpus) || status=1
done
exit $status
