#!/usr/bin/env bash
# Quick-start command 1: sets up a fresh machine, builds, and runs the main job,
# `strata train` (Fashion-MNIST, MirroredStrategy over every core).
#   scripts/run.sh                       # strata train
#   scripts/run.sh --model cnn --epochs 3   # flags go to strata train
#   scripts/run.sh topology --devices 4     # a subcommand name runs that subcommand
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
if (($# == 0)) || [[ "$1" == -* ]]; then
  set -- train "$@"
fi
exec "$build/tools/strata/strata" "$@"
