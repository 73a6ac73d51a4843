#!/usr/bin/env bash
# Measures what including fluxion costs a user: the umbrella header alone, and each example, with
# g++ at -O2 -march=native (the flags the README recommends): CPU seconds, best of three runs.
#   scripts/measure-compile-time.sh [extra compiler flags...]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

./scripts/install-deps.sh
cxx=${CXX:-g++}
flags=(-std=c++20 -O2 -march=native -Iinclude "$@")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# best_of_three <label> <source>: the compiler's CPU time (user + system), best of three runs.
# CPU time rather than wall time: on a shared machine it barely moves with the load.
best_of_three() {
  local label=$1 source=$2 best=""
  for _ in 1 2 3; do
    local cpu
    cpu=$( { TIMEFORMAT='%U %S'; time "$cxx" "${flags[@]}" -c "$source" -o "$scratch/out.o"; } 2>&1 | tail -n 1)
    cpu=$(awk '{ printf "%.2f", $1 + $2 }' <<<"$cpu")
    if [[ -z "$best" ]] || awk -v a="$cpu" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$cpu; fi
  done
  printf '%-44s %6s s\n' "$label" "$best"
}

printf '#include <fluxion/fluxion.hpp>\nint main() { return 0; }\n' > "$scratch/umbrella.cpp"
echo "$cxx $($cxx -dumpfullversion), flags: ${flags[*]}"
best_of_three "#include <fluxion/fluxion.hpp>" "$scratch/umbrella.cpp"
for example in examples/*.cpp; do
  best_of_three "$example" "$example"
done
