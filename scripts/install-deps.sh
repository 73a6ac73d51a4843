#!/usr/bin/env bash
# Installs what fluxion needs on Debian 12 (bookworm). Packages already installed are skipped, so on
# a ready machine this does nothing and needs no network.
#   scripts/install-deps.sh           build tools, xtensor, xsimd, doctest, Google Benchmark, zlib,
#                                     Open MPI (<fluxion/distributed.hpp> and its tests), clang (the
#                                     clang.* tests compile the examples with it too), and the
#                                     Fashion-MNIST data set (/usr/share/datasets/fashion-mnist)
#   scripts/install-deps.sh --bench   also the peers the benchmarks compare against (OpenBLAS, LibTorch,
#                                     and Gloo's headers for LibTorch's process group)
set -euo pipefail

packages=(build-essential cmake ccache xtensor-dev libxsimd-dev doctest-dev libbenchmark-dev zlib1g-dev
          libopenmpi-dev openmpi-bin clang dataset-fashion-mnist)
for arg in "$@"; do
  case "$arg" in
    --bench) packages+=(libopenblas-dev libtorch-dev libgloo-dev) ;;
    *) echo "install-deps.sh: unknown argument '$arg' (expected --bench)" >&2; exit 2 ;;
  esac
done
# The device-generic tests need Thrust: from the CUDA toolkit when there is one, else Debian's.
if [[ ! -e /usr/local/cuda/include/cccl/thrust/version.h && ! -e /usr/local/cuda/include/thrust/version.h ]]; then
  packages+=(libthrust-dev libcub-dev)
fi

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$package")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if ! command -v apt-get >/dev/null; then
  echo "install-deps.sh: missing ${missing[*]}, and apt-get is not available: install them yourself" >&2
  exit 1
fi
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    sudo=(sudo)
  else
    echo "install-deps.sh: missing ${missing[*]}: run as root, or install sudo" >&2
    exit 1
  fi
fi
echo "install-deps.sh: installing ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
