#!/usr/bin/env bash
# scripts/demo.sh stops cleanly on SIGINT sent without a terminal (so to the
# script alone, not to a process group): it used to finish the step it was
# in, go on to the load step and print a spurious "chainctl: UNAVAILABLE".
# Starts `demo.sh --once` in a session of its own with no terminal, waits
# until the scenarios run, sends SIGINT to the script, and checks: exit 130
# within 10 s, no later step started, no chainctl error, no process of its session
# left behind.
#   demo_sigint_test.sh BUILD_DIR   (a configured build of this tree)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/hopbudget-demo-sigint.XXXXXX")
trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/demo_test_lib.sh"

# As a supervisor would start it: in a session of its own, no terminal, and
# SIGINT at its default (a job started with & by a shell without job
# control would ignore it, and an ignored signal cannot be trapped).
HOPBUDGET_DEMO_BUILD_DIR=$build setsid env --default-signal=INT "$root/scripts/demo.sh" --once \
  >"$dir/out" 2>"$dir/err" </dev/null &
pid=$!
running() { kill -0 "$pid" 2>/dev/null; }
in_scenarios() { grep -q '^== (a)' "$dir/out" || ! running; }
wait_for 240 in_scenarios || fail "the scenarios did not start"
running || fail "demo.sh ended before the scenarios"
sent=$SECONDS
kill -INT "$pid"
stopped() { ! running; }
# At once: the scenarios alone run ~20 s more, which a deferred trap would wait for.
wait_for 10 stopped || { kill -KILL -- "-$pid" 2>/dev/null; fail "still running 10 s after SIGINT"; }
wait "$pid"
rc=$?
took=$((SECONDS - sent))
[ "$rc" -eq 130 ] || fail "exit status $rc, want 130"
grep -q 'demo: interrupted, stopping the chains' "$dir/err" || fail "no word of the interrupt"
grep -q '==> the measurement first' "$dir/out" && fail "went on to the probe step"
grep -q '==> mixed load' "$dir/out" && fail "went on to the load step"
grep -q 'chainctl:' "$dir/out" "$dir/err" && fail "a chainctl error was printed"
left=$(pgrep -s "$pid" || true)
[ -z "$left" ] || fail "processes left in its session: $left"
echo "ok: exit 130 ${took}s after SIGINT, no later step, no chainctl error, nothing left running"
