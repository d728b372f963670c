#!/usr/bin/env bash
# Quick-start command 2: sets up a fresh machine, builds, and runs every test.
# Slow cases (label "slow") are skipped here; they are run by the examples and
# benchmarks, or with: ctest --test-dir build -L slow
# So are the clang-tidy tests (label "lint", about 12 min of CPU): pass --lint to run
# them too (scripts/lint.sh over every unit after the tests).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
lint=0
for arg in "$@"; do
  case "$arg" in
    --lint) lint=1 ;;
    *) echo "test.sh: unknown argument '$arg' (only --lint)" >&2; exit 2 ;;
  esac
done
"$root/scripts/setup.sh"
# --repeat until-pass:2: the thread-run multi-worker tests (real Gloo over loopback) have failed
# about once in 50 runs on a loaded machine (under investigation, see the closing note of
# session 2); a test that fails twice still fails the suite.
ctest --test-dir "$build" -j "$(nproc)" -LE "slow|lint" --output-on-failure --timeout 600 --repeat until-pass:2
((lint == 0)) || "$root/scripts/lint.sh" --build "$build"
