#!/usr/bin/env bash
# Installs dependencies (and the Fashion-MNIST data set), builds one example (Release, in build/)
# and runs it from build/examples.
#   scripts/run-example.sh [name] [arguments for the example]
# name: examples/<name>.cpp, default fashion_mnist_cnn (trains the TF tutorial's CNN on Fashion-MNIST;
# e.g. scripts/run-example.sh --epochs 3).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

name=fashion_mnist_cnn
if [[ $# -gt 0 && "$1" != -* ]]; then
  name=$1
  shift
fi
if [[ ! -f "examples/$name.cpp" && "$name" != readme_quickstart && "$name" != readme_gradients ]]; then
  echo "run-example.sh: no example '$name'; the examples are:" >&2
  for file in examples/*.cpp; do [[ -e "$file" ]] && basename "$file" .cpp >&2; done
  exit 2
fi

./scripts/install-deps.sh
configure -DFLUXION_BUILD_EXAMPLES=ON -DFLUXION_BUILD_BENCHMARKS=OFF
cmake --build "$build_dir" --parallel "$jobs" --target "example_$name"
cd "$build_dir/examples"
if [[ "$name" == *_distributed ]]; then
  # Two processes (FLUXION_PROCESSES=N for more); Open MPI's flags for more processes than cores and for root.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  exec mpirun --oversubscribe -np "${FLUXION_PROCESSES:-2}" "./$name" "$@"
fi
exec "./$name" "$@"
