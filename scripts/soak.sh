#!/usr/bin/env bash
# Runs `demo.sh --once` again and again, each run on fresh chains, and fails
# if any service crashed: died during a run, did not exit 0 on SIGTERM at
# its end, or printed a sanitizer report. A check that misses its figures
# (a sanitizer build is several times slower) is counted and listed, but is
# not a crash.
#
#   ./scripts/soak.sh                      # 50 runs of the release build in build/test
#   ./scripts/soak.sh --sanitize           # the same with AddressSanitizer + UBSan (build/asan)
#   ./scripts/soak.sh --runs 3 --sanitize  # the short form .ci/run takes
#
# Each run's output is kept in a directory under $TMPDIR, named at the end.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
cd "$(hopbudget_root)"

runs=50
sanitize=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=${2:?--runs takes a count}; shift ;;
    --sanitize) sanitize=1 ;;
    *) echo "usage: $0 [--runs N] [--sanitize]" >&2; exit 2 ;;
  esac
  shift
done
case "$runs" in
  '' | *[!0-9]* | 0) echo "soak: --runs takes a count of at least 1, not '$runs'" >&2; exit 2 ;;
esac

ensure_packages "${HOPBUDGET_BUILD_PACKAGES[@]}"
if [ $sanitize -eq 1 ]; then
  build=build/asan
  cmake_args=("${HOPBUDGET_ASAN_CMAKE_ARGS[@]}")
  export_sanitizer_options
else
  build=build/test
  cmake_args=("${HOPBUDGET_RELEASE_CMAKE_ARGS[@]}")
fi
# The same trees test.sh builds: a CI run or a developer's test run leaves
# them configured, and the soak only builds the demo's targets in them.
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja "${cmake_args[@]}" >/dev/null
fi

logs=$(mktemp -d "${TMPDIR:-/tmp}/hopbudget-soak.XXXXXX")
crashes=0 missed=0
start=$(date +%s)
for i in $(seq 1 "$runs"); do
  log="$logs/run-$i.log"
  rc=0
  HOPBUDGET_DEMO_BUILD_DIR=$build ./scripts/demo.sh --once >"$log" 2>&1 || rc=$?
  # demo.sh prints "did not stop cleanly" or "died during the demo" for a
  # crashed service, "!!" for every check it missed, and its verdict last.
  if grep -q -E 'did not stop cleanly|died during the demo|did not start' "$log"; then
    crashes=$((crashes + 1))
    echo "soak: run $i/$runs: a service crashed ($log):"
    grep -E -A 12 'did not stop cleanly|died during the demo|did not start' "$log" | sed 's/^/  /'
  elif ! grep -q '^demo: .*\(behaved as expected\|did not behave as expected\)' "$log"; then
    crashes=$((crashes + 1))
    echo "soak: run $i/$runs: the demo did not run to its end ($log):"
    tail -n 12 "$log" | sed 's/^/  /'
  elif [ $rc -ne 0 ]; then
    missed=$((missed + 1))
    echo "soak: run $i/$runs: no crash; missed: $(grep -c '!!' "$log") check(s) ($log)"
    grep '!!' "$log" | sed 's/^ */    /'
  else
    echo "soak: run $i/$runs: every check passed"
  fi
done
echo "soak: $runs run(s) of $build in $(($(date +%s) - start)) s: $crashes with a crashed" \
  "service, $missed more with a missed check; logs in $logs"
[ $crashes -eq 0 ]
