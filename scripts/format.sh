#!/usr/bin/env bash
# Formats the C++ sources tracked by git with clang-format 14 and the
# repository's .clang-format.
#
#   ./scripts/format.sh           # rewrites the files in place
#   ./scripts/format.sh --check   # changes nothing; lists the files that are not
#                                 # formatted and exits 1 if there is any
#   ./scripts/format.sh [--check] PATH...   # only these files or folders
#
# Generated code (build trees, *.pb.h, *.pb.cc) is never tracked, so never
# touched. Installs clang-format-14 when it is missing (Debian 12).
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
cd "$(hopbudget_root)"

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }

check=0
paths=()
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "error: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) [ -e "$1" ] || { echo "error: no such file or folder: $1" >&2; exit 2; }
       paths+=("$1") ;;
  esac
  shift
done

ensure_packages clang-format-14
clang_format=clang-format-14
command -v "$clang_format" >/dev/null || { echo "error: $clang_format not found" >&2; exit 2; }

mapfile -t files < <(git ls-files -- "${paths[@]}" | grep -E '\.(cc|h|cpp|hpp)$' || true)
if [ ${#files[@]} -eq 0 ]; then
  echo "format: no C++ files tracked under ${paths[*]:-.}" >&2
  exit 0
fi

if [ "$check" -eq 0 ]; then
  "$clang_format" -i --style=file "${files[@]}"
  echo "format: ${#files[@]} files formatted"
  exit 0
fi

unformatted=()
for f in "${files[@]}"; do
  if ! "$clang_format" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
    unformatted+=("$f")
  fi
done
if [ ${#unformatted[@]} -eq 0 ]; then
  echo "format: ${#files[@]} files, all formatted"
  exit 0
fi
printf '%s\n' "${unformatted[@]}"
echo "format: ${#unformatted[@]} of ${#files[@]} files are not formatted (./scripts/format.sh fixes them)" >&2
exit 1
