#!/usr/bin/env bash
# Quick-start command 2: sets up a fresh machine, builds, and runs every test.
# Slow cases (label "slow") are skipped here; they are run by the examples and
# benchmarks, or with: ctest --test-dir build -L slow
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
ctest --test-dir "$build" -j "$(nproc)" -LE slow --output-on-failure --timeout 600
