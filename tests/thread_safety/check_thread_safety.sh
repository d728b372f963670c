#!/usr/bin/env bash
# Compiles translation units (all but the *_test.cc ones) with clang's
# thread-safety analysis, its findings as errors: a STRATA_GUARDED_BY member
# touched without its strata::Mutex, a STRATA_REQUIRES function called without
# the lock, a lock left held. The
# flags of each unit (include paths, definitions, -std) come from the build's
# compile_commands.json, so a GCC build is checked with the installed clang
# (syntax only: nothing is code-generated). Exits 1 on a finding, 2 on a usage
# or set-up problem.
#
#   tests/thread_safety/check_thread_safety.sh --build build strata bench/peers
#   tests/thread_safety/check_thread_safety.sh --build build --jobs 2 strata/data strata/core
#   tests/thread_safety/check_thread_safety.sh --build build \
#       --expect-rejection tests/thread_safety/violation.cc
#
# --expect-rejection FILE compiles FILE (no unit of the build) with the flags of
# strata/base/thread_pool.cc and succeeds only when clang reports a
# thread-safety error on every line of FILE marked `// VIOLATION` and on no
# other line: the check itself is tested by a planted violation.
#
# CTest runs it as ThreadSafety.* (tests/CMakeLists.txt); the clang-tsa preset
# builds everything with clang and -Wthread-safety -Werror instead.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build=""
jobs="$(nproc)"
fixture=""
folders=()
while (($#)); do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --expect-rejection) fixture="$2"; shift 2 ;;
    -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "thread-safety: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) folders+=("${1%/}"); shift ;;
  esac
done
db="$build/compile_commands.json"
[[ -n "$build" && -f "$db" ]] || {
  echo "thread-safety: expected --build DIR holding compile_commands.json, got '$build'" >&2
  exit 2
}
clang="$(command -v clang++ || command -v clang++-14 || true)"
[[ -n "$clang" ]] || {
  echo "thread-safety: clang++ not found; install Debian's clang (scripts/packages.txt)" >&2
  exit 2
}
tsa_flags="-fsyntax-only -Wthread-safety -Werror=thread-safety"

# Prints the compile command of unit $1 (an absolute path) with JSON's escapes undone.
command_of() {
  grep -F -B1 "\"file\": \"$1\"" "$db" | sed -n 's/^ *"command": "\(.*\)",$/\1/p' |
    sed 's/\\\(.\)/\1/g' | head -1
}

# Prints the arguments of the command $1 that matter for parsing (include paths,
# definitions, the language standard), one per line; the compiler, -o/-c, the
# GCC warning flags and a precompiled header are dropped.
parse_flags() {
  local -a words
  eval "words=($1)"
  local i=1
  while ((i < ${#words[@]})); do
    case "${words[i]}" in
      -o|-c) i=$((i + 2)); continue ;;
      -W*|-O*|-f*) ;;
      # CMake's precompiled header is GCC's (.gch), which clang cannot read; the
      # unit includes what it uses itself.
      -include) [[ "${words[i + 1]}" == */cmake_pch.hxx ]] ||
                  printf '%s\n%s\n' "${words[i]}" "${words[i + 1]}"
                i=$((i + 2)); continue ;;
      -isystem|-I|-D) printf '%s\n%s\n' "${words[i]}" "${words[i + 1]}"; i=$((i + 2)); continue ;;
      -I*|-D*|-U*|-std=*) printf '%s\n' "${words[i]}" ;;
    esac
    i=$((i + 1))
  done
}

# Checks unit $1; prints clang's findings and returns 1 on any.
check_unit() {
  local cmd out status=0
  cmd="$(command_of "$1")"
  [[ -n "$cmd" ]] || { echo "thread-safety: no command for $1 in $db" >&2; return 2; }
  local -a flags
  mapfile -t flags < <(parse_flags "$cmd")
  # shellcheck disable=SC2086 # tsa_flags is a list of words
  out="$(cd "$build" && "$clang" "${flags[@]}" $tsa_flags "$1" 2>&1)" || status=$?
  ((status == 0)) && return 0
  echo "$out"
  return 1
}
export -f command_of parse_flags check_unit
export db clang build tsa_flags root

if [[ -n "$fixture" ]]; then
  anchor="$root/strata/base/thread_pool.cc"
  [[ "$fixture" == /* ]] || fixture="$root/$fixture"
  mapfile -t flags < <(parse_flags "$(command_of "$anchor")")
  ((${#flags[@]})) || { echo "thread-safety: no command for $anchor in $db" >&2; exit 2; }
  set +e
  # shellcheck disable=SC2086
  out="$("$clang" "${flags[@]}" $tsa_flags "$fixture" 2>&1)"
  set -e
  name="$(basename "$fixture")"
  got="$(grep -o "$name:[0-9]*:[0-9]*: error: .*\[-Werror,-Wthread-safety[a-z-]*\]" <<<"$out" |
         cut -d: -f2 | sort -un)"
  want="$(grep -n '// VIOLATION' "$fixture" | cut -d: -f1 | sort -un)"
  if [[ -z "$want" ]]; then
    echo "thread-safety: $fixture marks no line '// VIOLATION'" >&2
    exit 2
  fi
  if [[ "$got" != "$want" ]]; then
    echo "$out"
    echo "thread-safety: expected errors on lines $(echo $want) of $name, got them on lines" \
         "$(echo ${got:-none})" >&2
    exit 1
  fi
  echo "thread-safety: $name rejected on every marked line ($(echo $want))"
  exit 0
fi

((${#folders[@]})) || { echo "thread-safety: expected folders to check (e.g. strata)" >&2; exit 2; }
units=()
while read -r f; do
  rel="${f#"$root"/}"
  [[ "$rel" == "$f" ]] && continue  # generated under the build tree
  [[ "$rel" == *_test.cc ]] && continue  # the library and programs, not their tests
  for p in "${folders[@]}"; do
    if [[ "$rel" == "$p"/* || "$rel" == "$p" ]]; then units+=("$f"); break; fi
  done
done < <(grep -o '"file": "[^"]*"' "$db" | sed 's/^"file": "//; s/"$//' | sort -u)
((${#units[@]})) || { echo "thread-safety: no unit of $db under ${folders[*]}" >&2; exit 2; }
if printf '%s\0' "${units[@]}" | xargs -0 -n 1 -P "$jobs" bash -c 'check_unit "$0"'; then
  echo "thread-safety: ${#units[@]} units under ${folders[*]} pass -Wthread-safety"
else
  echo "thread-safety: findings above (${#units[@]} units under ${folders[*]} checked)" >&2
  exit 1
fi
