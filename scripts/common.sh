# Sourced by the run-*.sh scripts: moves to the repository root and defines the shared helpers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jobs=${FLUXION_JOBS:-$(nproc 2>/dev/null || echo 2)}  # FLUXION_JOBS overrides the build and test parallelism
# FLUXION_BUILD_DIR overrides the build folder: another compiler needs a folder of its own, as
#   CXX=clang++ FLUXION_BUILD_DIR=build-clang ./scripts/run-tests.sh
# (CMake reads CXX when it first configures a folder).
build_dir=${FLUXION_BUILD_DIR:-build}

# configure <cmake -D options>...: configures $build_dir (build/) as a Release build.
configure() {
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@"
}

# cuDNN for the GPU builds (backend/cuda/cudnn.hpp): where nvcc's toolkit has cudnn.h and
# FLUXION_CUDNN is not 0, adds -DFLUXION_USE_CUDNN=1 to the array named $1 and -lcudnn to $2.
cudnn_flags() {
  local -n _flags=$1 _libs=$2
  local root; root=$(dirname "$(dirname "$nvcc")")
  if [[ "${FLUXION_CUDNN:-1}" != 0 && -e "$root/include/cudnn.h" ]]; then
    _flags+=(-DFLUXION_USE_CUDNN=1)
    _libs+=(-lcudnn)
    echo "cuDNN: $root/include/cudnn.h (FLUXION_CUDNN=0 builds without it)"
  fi
}

# On the GPU machine: where the loader does not know libcudnn.so.9 (the device tool's image has
# it only in PyTorch's nvidia-cudnn wheel), puts that wheel's folder on LD_LIBRARY_PATH.
cudnn_library_path() {
  ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9' && return 0
  local found
  found=$(find /opt /usr/local /usr/lib -name 'libcudnn.so.9' -path '*cudnn*' 2>/dev/null | head -1)
  if [[ -n "$found" ]]; then
    export LD_LIBRARY_PATH="$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "cuDNN: $found"
  fi
}

# require_free_space <MiB for a build from scratch>: stops with a clear message, before any
# compiler runs, when the file system of build/ (or the compilers' temporary folder) has less room
# than the build needs. A build that runs out of space fails half-way with "No space left on
# device" from whichever compiler hit it first. A build/ that already holds a configured build
# needs a quarter of the room. FLUXION_SKIP_SPACE_CHECK=1 skips the check.
require_free_space() {
  [[ "${FLUXION_SKIP_SPACE_CHECK:-0}" == 1 ]] && return 0
  local need_mib=$1 tmp=${TMPDIR:-/tmp} free_mib
  [[ -e "$build_dir/CMakeCache.txt" ]] && need_mib=$((need_mib / 4))
  free_mib=$(df -Pk . | awk 'NR == 2 { print int($4 / 1024) }')
  if [[ -n "$free_mib" && "$free_mib" -lt "$need_mib" ]]; then
    echo "${0##*/}: only $free_mib MiB free on the file system of $PWD/$build_dir; the build needs about $need_mib MiB." >&2
    echo "${0##*/}: free some space (or set FLUXION_SKIP_SPACE_CHECK=1 to try anyway)." >&2
    exit 1
  fi
  free_mib=$(df -Pk "$tmp" 2>/dev/null | awk 'NR == 2 { print int($4 / 1024) }')
  if [[ -n "$free_mib" && "$free_mib" -lt 256 ]]; then
    echo "${0##*/}: only $free_mib MiB free in $tmp, where the compilers write their temporary files; they need about 256 MiB." >&2
    echo "${0##*/}: free some space there, or point TMPDIR at a folder with room (FLUXION_SKIP_SPACE_CHECK=1 tries anyway)." >&2
    exit 1
  fi
}

# run_limited SECONDS COMMAND ARGS...: COMMAND under `timeout`, saying on stderr when it ran past
# the limit and was stopped (a GPU kernel that hangs costs its own results, not a device call).
# Returns COMMAND's status, 124 when stopped.
run_limited() {
  local limit=$1 rc=0
  shift
  timeout "$limit" "$@" || rc=$?
  (( rc != 124 )) || echo "$(basename "$1") ran past $limit s and was stopped" >&2
  return $rc
}
