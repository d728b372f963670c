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

seed() {  # seed <dir> <name> <hex>
  mkdir -p "$1"
  printf '%s' "$3" | xxd -r -p >"$1/$2"
}
corpus="$build/corpus"
# TFRecord: first byte 0 = uncompressed; the spec's empty and "hello" records.
seed "$corpus/tfrecord" empty "00""0000000000000000""29039807""d8ea82a2"
seed "$corpus/tfrecord" hello "00""0500000000000000""eab2043e""68656c6c6f""bb1f1c19"
seed "$corpus/example" spec "0a0c0a0a0a016112051a030a0101"
# IDX / text / fixed-length: first byte picks compression and record sizes; a 2x3 IDX file.
seed "$corpus/idx" idx "00""00000802""00000002""00000003""010203040506"
seed "$corpus/idx" lines "00""610a62620d0a0a6c617374"

status=0
for target in tfrecord_reader_fuzz example_parser_fuzz idx_text_fuzz; do
  dir="$corpus/${target%%_*}"   # tfrecord_reader_fuzz -> corpus/tfrecord, example_... -> corpus/example, idx_... -> corpus/idx
  echo "== $target for ${secs}s"
  if ! "$build/$target" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 "$dir" 2>"$build/$target.log"; then
    echo "FAILED: $target (log: $build/$target.log)"; tail -40 "$build/$target.log"; status=1
  else
    grep -E "stat::number_of_executed_units|Done" "$build/$target.log" | tail -2
  fi
done
exit $status
