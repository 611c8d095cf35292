#!/usr/bin/env bash
# The long outages of the partition test: orders <-> ledger blackholed for
# 30 s and then 60 s under 20 calls/s, with the same checks as the ctest
# (answers within budget + 50 ms, bounded calls and threads at every hop,
# first and steady OK within 5 s of the heal). Not in ctest, to keep CI short.
# Prints one RESULT line per outage (bench/'s style) and exits non-zero when
# a check failed. Needs root and iproute2, like the ctest.
#
#   tests/partition/long_outage.sh [BUILD_DIR]   # default build/test
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=${1:-build/test}
cmake --build "$build_dir" --target partition_test
out=$(mktemp "${TMPDIR:-/tmp}/hopbudget-long-outage.XXXXXX")
status=0
"$build_dir/tests/partition/partition_test" --gtest_also_run_disabled_tests \
  --gtest_filter='PartitionBench.*' >"$out" 2>&1 || status=$?
grep -E '^RESULT|^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure|Expected|Which is|trace:' "$out" || true
rm -f "$out"
exit "$status"
