#!/usr/bin/env bash
# Runs clang-tidy (the checks in .clang-tidy) over the project's translation units
# listed in the build's compile_commands.json; project headers are checked through
# the units that include them (HeaderFilterRegex). Generated sources under the build
# tree are skipped. Exits 1 on any finding, 2 on a usage or set-up problem.
#
#   scripts/lint.sh                          # every unit, nproc jobs, build/ (after scripts/setup.sh)
#   scripts/lint.sh strata/keras             # only units under these folders
#   scripts/lint.sh --exclude strata         # every unit outside strata/
#   scripts/lint.sh --jobs 1 --build /tmp/b strata/io
#
# CTest runs it in four parts (tests Lint.ClangTidy.*, label "lint"; tests/CMakeLists.txt).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
jobs="$(nproc)"
includes=()
excludes=()
while (($#)); do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --exclude) excludes+=("${2%/}"); shift 2 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "lint: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) includes+=("${1%/}"); shift ;;
  esac
done
((${#includes[@]})) || includes=(strata tools tests bench examples)

db="$build/compile_commands.json"
if [[ ! -f "$db" ]]; then
  echo "lint: $db is missing; configure and build first (scripts/setup.sh)" >&2
  exit 2
fi
tidy="$(command -v clang-tidy || command -v clang-tidy-14 || true)"
if [[ -z "$tidy" ]]; then
  echo "lint: clang-tidy not found; install Debian's clang-tidy (scripts/packages.txt)" >&2
  exit 2
fi

# CMake writes one '"file": "<absolute path>"' line per unit.
files=()
while read -r f; do
  rel="${f#"$root"/}"
  [[ "$rel" == "$f" ]] && continue  # outside the source tree (generated under the build dir)
  keep=0
  for p in "${includes[@]}"; do [[ "$rel" == "$p"/* ]] && keep=1; done
  for p in "${excludes[@]}"; do [[ "$rel" == "$p"/* ]] && keep=0; done
  ((keep)) && files+=("$f")
done < <(grep -o '"file": "[^"]*"' "$db" | sed 's/^"file": "//; s/"$//' | sort -u)
if ((${#files[@]} == 0)); then
  echo "lint: no unit of $db under ${includes[*]} (excluding ${excludes[*]:-nothing})" >&2
  exit 2
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export tidy build out
# One clang-tidy per unit; a unit's report lands in its own file so parallel runs do not interleave.
lint_one() {
  local log="$out/$(printf '%s' "$1" | tr '/' '_').log"
  "$tidy" -p "$build" --quiet "$1" >"$log" 2>&1 && rm -f "$log"
  return 0
}
export -f lint_one
start=$SECONDS
printf '%s\n' "${files[@]}" | xargs -P "$jobs" -I{} bash -c 'lint_one "$1"' _ {}
failed=("$out"/*.log)
if [[ -e "${failed[0]}" ]]; then
  for log in "${failed[@]}"; do grep -v ' warnings\? generated\.$' "$log" >&2 || true; done
  echo "lint: clang-tidy found problems in ${#failed[@]} of ${#files[@]} units (above)" >&2
  exit 1
fi
echo "lint: clang-tidy clean over ${#files[@]} units in $((SECONDS - start)) s"
