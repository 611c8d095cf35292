#!/usr/bin/env bash
# A service that crashes during `scripts/demo.sh --once` is reported by
# name and fails the run (issue 29: orders segfaulted in one of two demo
# runs, and scripts/soak.sh counts crashes by these words). Twice, on one
# run: the hopbudget read replica gets SIGSEGV once the deploy scenario
# starts (no later step calls it), so the demo runs to its end and its
# services check must name it; then a run whose orders gets SIGSEGV in the
# mixed load, which ends the demo at the step that failed, where cleanup
# must name it.
#   demo_crash_test.sh BUILD_DIR   (a configured build of this tree)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/hopbudget-demo-crash.XXXXXX")
pid=""
trap '[ -n "$pid" ] && kill -KILL -- "-$pid" 2>/dev/null; rm -rf "$dir"' EXIT
source "$(dirname "$0")/demo_test_lib.sh"
running() { kill -0 "$pid" 2>/dev/null; }
printed() { grep -q "$1" "$dir/out" || ! running; }
ended() { ! running; }
# crash_at SECTION PATTERN: starts the demo in a session of its own, sends
# SIGSEGV to the one service of that session whose command line matches
# PATTERN once the demo prints SECTION, waits for the demo to end; sets $rc.
crash_at() {
  # Emptied here, not only by the background job's redirection: until the
  # job opens it, the file still holds the previous run, whose SECTION line
  # would be found before this run's services exist.
  : >"$dir/out"
  : >"$dir/err"
  HOPBUDGET_DEMO_BUILD_DIR=$build setsid "$root/scripts/demo.sh" --once \
    >"$dir/out" 2>"$dir/err" </dev/null &
  pid=$!
  wait_for 280 printed "$1" || fail "the demo did not reach '$1'"
  running || fail "demo.sh ended before '$1'"
  local victim
  victim=$(pgrep -s "$pid" -f -- "$2")
  [ "$(wc -w <<<"$victim")" = 1 ] || fail "not one process matches '$2': '$victim'"
  kill -SEGV "$victim"
  wait_for 280 ended || fail "still running 280 s after the crash"
  rc=0
  wait "$pid" || rc=$?
  pid=""
}

crash_at '^==> a deploy' 'server/ledger .*--name=ledger-replica --mode=hopbudget'
[ "$rc" = 1 ] || fail "exit status $rc after a crash, want 1"
grep -q '^==> overload' "$dir/out" || fail "the demo did not go on to its last scenario"
# 139: killed by SIGSEGV; 134: an ASan build's SEGV handler reports, then
# aborts (abort_on_error=1, scripts/lib/common.sh).
grep -q -E '!!   hb-replica died during the demo \(exit status 1(39|34)\)' "$dir/out" ||
  fail "the services check did not name the crashed replica"
grep -q 'stopped cleanly' "$dir/out" && fail "said every service stopped cleanly"

crash_at '^==> mixed load' 'server/orders .*--name=orders --mode=hopbudget'
[ "$rc" != 0 ] || fail "exit status 0 after a crash"
grep -q 'demo: hb-orders died during the demo' "$dir/err" ||
  fail "the demo ended without naming the crashed orders"
echo "ok: a crash at the end and one mid-step are named and fail the demo"
