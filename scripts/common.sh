# Sourced by the run-*.sh scripts: moves to the repository root and defines the shared helpers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jobs=${FLUXION_JOBS:-$(nproc 2>/dev/null || echo 2)}  # FLUXION_JOBS overrides the build and test parallelism
build_dir=build

# configure <cmake -D options>...: configures build/ as a Release build.
configure() {
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@"
}
