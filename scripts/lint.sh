#!/usr/bin/env bash
# Runs clang-tidy (checks in .clang-tidy) over every project source file in the
# build's compile_commands.json; generated protobuf sources under the build tree
# are skipped. Exits non-zero on any finding.
#
#   scripts/lint.sh                  # uses build/ (configure it first: scripts/setup.sh)
#   STRATA_BUILD_DIR=/tmp/b scripts/lint.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
if [[ ! -f "$build/compile_commands.json" ]]; then
  echo "lint: $build/compile_commands.json is missing; run scripts/setup.sh first" >&2
  exit 2
fi
tidy="$(command -v run-clang-tidy || command -v run-clang-tidy-14 || true)"
if [[ -z "$tidy" ]]; then
  echo "lint: run-clang-tidy not found; install the clang-tidy package (scripts/setup.sh does)" >&2
  exit 2
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# run-clang-tidy exits non-zero when a file has an error; -quiet keeps the summary short.
if ! "$tidy" -p "$build" -j "$(nproc)" -quiet "^$root/(strata|tools|examples|bench|tests)/" >"$log" 2>&1; then
  grep -E "(error|warning): " "$log" | sort -u >&2 || cat "$log" >&2
  echo "lint: clang-tidy found problems (above)" >&2
  exit 1
fi
echo "lint: clang-tidy clean"
