#!/usr/bin/env bash
# Quick-start command 1: sets up a fresh machine, builds, and runs the main job
# (`strata train` on Fashion-MNIST). Extra arguments go to `strata train`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
exec "$build/tools/strata/strata" "$@"
