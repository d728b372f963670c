#!/usr/bin/env bash
# Quick-start command 2: sets up a fresh machine, builds, and runs every test.
# Slow cases (label "slow") are skipped here; they are run by the examples and
# benchmarks, or with: ctest --test-dir build -L slow
# The clang-tidy tests (label "lint": the units changed since tests/lint/baseline, see
# README "Formatting and linting") are part of it; --no-lint skips them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
skip="slow"
for arg in "$@"; do
  case "$arg" in
    --no-lint) skip="slow|lint" ;;
    *) echo "test.sh: unknown argument '$arg' (only --no-lint)" >&2; exit 2 ;;
  esac
done
"$root/scripts/setup.sh"
# TensorFlow.js for tests/tfjs (label "tfjs"), where npm is installed: cached under
# ~/.cache/strata, so only the first run downloads it; without it (no npm, offline) those tests
# skip and say why.
# The install is bounded (3 minutes) so that an unreachable registry cannot stall the run.
if command -v npm > /dev/null; then
  timeout 180 "$root/scripts/install_tfjs.sh" ||
    echo "test.sh: TensorFlow.js not installed; the tfjs tests will skip"
fi
# Every test runs once: a test that fails fails the suite (a flaky test is a bug to find, not to
# rerun). The repeated runs that keep the multi-process tests honest are the "stress" target:
# cmake --build build --target stress
ctest --test-dir "$build" -j "$(nproc)" -LE "$skip" --output-on-failure --timeout 600
