#!/usr/bin/env bash
# Installs every Debian package Strata needs (idempotent: quick when all are
# present) and configures + builds the project.
#
#   scripts/setup.sh                 # packages + Release build in build/
#   scripts/setup.sh --bench         # also the benchmark peers (PyTorch, clang)
#   STRATA_BUILD_DIR=/tmp/b scripts/setup.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
lists=("$root/scripts/packages.txt")
[[ " $* " == *" --bench "* ]] && lists+=("$root/scripts/packages-bench.txt")

missing=()
for list in "${lists[@]}"; do
  while read -r pkg; do
    [[ -z "$pkg" || "$pkg" == \#* ]] && continue
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done < "$list"
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# Configure when there is no usable build tree (a configure that failed leaves a
# CMakeCache.txt but no build file).
if [[ ! -f "$build/build.ninja" && ! -f "$build/Makefile" ]]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${STRATA_CMAKE_ARGS:-}
fi
cmake --build "$build" -j "$(nproc)"
