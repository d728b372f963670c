#!/usr/bin/env bash
# Builds the io fuzz targets (tests/fuzz, clang + libFuzzer + ASan/UBSan) and runs
# each for a bounded time from a seed corpus of the spec's fixtures.
#   scripts/fuzz.sh [seconds per target, default 30] [build dir, default build-fuzz]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-30}"
build="${2:-$repo/build-fuzz}"
cxx="$(command -v clang++-14 || command -v clang++)"

cmake -S "$repo/tests/fuzz" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$cxx" -DSTRATA_BUILD_FUZZERS=ON >/dev/null
cmake --build "$build" -j2

# Seed corpus: the checked-in seeds (tests/fuzz/seeds/<target>.hex, one input per
# line in hex, '#' comments, "-" = empty), which the Fuzz.* ctests replay too.
corpus="$build/corpus"
for target in tfrecord_reader_fuzz example_parser_fuzz idx_text_fuzz; do
  dir="$corpus/$target"
  mkdir -p "$dir"
  n=0
  grep -v '^#' "$repo/tests/fuzz/seeds/$target.hex" | while IFS= read -r line; do
    n=$((n + 1))
    if [ "$line" = "-" ]; then : >"$dir/seed$n"; else printf '%s' "$line" | xxd -r -p >"$dir/seed$n"; fi
  done
done

status=0
for target in tfrecord_reader_fuzz example_parser_fuzz idx_text_fuzz; do
  dir="$corpus/$target"
  echo "== $target for ${secs}s"
  if ! "$build/$target" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 "$dir" 2>"$build/$target.log"; then
    echo "FAILED: $target (log: $build/$target.log)"; tail -40 "$build/$target.log"; status=1
  else
    grep -E "stat::number_of_executed_units|Done" "$build/$target.log" | tail -2
  fi
done
exit $status
