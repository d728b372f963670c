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
#   scripts/lint.sh --changed-since tests/lint/baseline strata
#                                            # only units that differ from the commit named in that
#                                            # file (or given as a revision), see below
#   scripts/lint.sh --write-baseline         # every unit; when clean, records HEAD as the baseline
#
# --changed-since keeps the units whose source differs from the baseline commit (committed or not),
# and the units that include, directly or through other project headers, a header that differs.
# A change to .clang-tidy or to this script, or a baseline that is not an ancestor of HEAD, lints
# every unit. With nothing changed under the folders it prints so and exits 0.
#
# CTest runs it in four parts (tests Lint.ClangTidy.*, label "lint"; tests/CMakeLists.txt).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
jobs="$(nproc)"
includes=()
excludes=()
since=""
write_baseline=0
while (($#)); do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --exclude) excludes+=("${2%/}"); shift 2 ;;
    --changed-since) since="$2"; shift 2 ;;
    --write-baseline) write_baseline=1; shift ;;
    -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "lint: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) includes+=("${1%/}"); shift ;;
  esac
done
whole_tree=0
((${#includes[@]})) || { includes=(strata tools tests bench examples); whole_tree=1; }

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

# The project headers a file includes, as paths from the root ("x.h" resolves beside the file).
included_headers() {
  local dir inc
  dir="$(dirname "${1#"$root"/}")"
  while read -r inc; do
    if [[ "$inc" == */* ]]; then echo "$inc"; else echo "$dir/$inc"; fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\([^">]*\)[">].*/\1/p' "$1")
}

# Narrows files to the units a change since the baseline can affect; sets scope for the summary.
scope="every unit"
select_changed() {
  local rev="$since"
  [[ -f "$root/$since" ]] && rev="$(tr -d '[:space:]' <"$root/$since")"
  if ! git -C "$root" rev-parse -q --verify "$rev^{commit}" >/dev/null ||
     ! git -C "$root" merge-base --is-ancestor "$rev" HEAD; then
    echo "lint: baseline '$rev' is not an ancestor of HEAD; linting every unit"
    return
  fi
  local changed
  changed="$( (git -C "$root" diff --name-only "$rev" --; git -C "$root" ls-files --others --exclude-standard) | sort -u)"
  if grep -qxE '\.clang-tidy|scripts/lint\.sh' <<<"$changed"; then
    echo "lint: .clang-tidy or scripts/lint.sh changed since $rev; linting every unit"
    return
  fi
  # Headers whose text changed, then every project header that includes one of them, to a fixed point.
  local -A touched=()
  local h
  while read -r h; do [[ "$h" == *.h ]] && touched["$h"]=1; done <<<"$changed"
  local grew=1 header inc
  while ((grew)); do
    grew=0
    while read -r header; do
      [[ -n "${touched[$header]:-}" ]] && continue
      while read -r inc; do
        if [[ -n "${touched[$inc]:-}" ]]; then touched["$header"]=1; grew=1; break; fi
      done < <(included_headers "$root/$header")
    done < <(git -C "$root" ls-files '*.h')
  done
  local kept=() f rel
  for f in "${files[@]}"; do
    rel="${f#"$root"/}"
    if grep -qxF "$rel" <<<"$changed"; then kept+=("$f"); continue; fi
    while read -r inc; do
      if [[ -n "${touched[$inc]:-}" ]]; then kept+=("$f"); break; fi
    done < <(included_headers "$f")
  done
  scope="the ${#kept[@]} of ${#files[@]} units a change since ${rev:0:12} can affect"
  files=("${kept[@]}")
}
if [[ -n "$since" ]]; then
  select_changed
  if ((${#files[@]} == 0)); then
    echo "lint: no unit under ${includes[*]} changed since the baseline; nothing to lint"
    exit 0
  fi
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# The test programs' commands force-include a GCC precompiled header (STRATA_TEST_PCH),
# which clang cannot read: clang-tidy gets the commands without it (the test files include
# what they use themselves).
mkdir "$out/db"
sed 's| -Winvalid-pch -include [^ ]*/cmake_pch\.hxx||' "$db" >"$out/db/compile_commands.json"
export tidy out
# One clang-tidy per unit; a unit's report lands in its own file so parallel runs do not interleave.
lint_one() {
  local log="$out/$(printf '%s' "$1" | tr '/' '_').log"
  "$tidy" -p "$out/db" --quiet "$1" >"$log" 2>&1 && rm -f "$log"
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
echo "lint: clang-tidy clean over ${#files[@]} units ($scope) in $((SECONDS - start)) s"
if ((write_baseline)); then
  if [[ -n "$since" || whole_tree -eq 0 || ${#excludes[@]} -ne 0 || -n "$(git -C "$root" status --porcelain)" ]]; then
    echo "lint: --write-baseline needs a full run (no folders, --exclude or --changed-since) of a clean work tree" >&2
    exit 2
  fi
  git -C "$root" rev-parse HEAD >"$root/tests/lint/baseline"
  echo "lint: tests/lint/baseline is now $(cat "$root/tests/lint/baseline"); commit it"
fi
