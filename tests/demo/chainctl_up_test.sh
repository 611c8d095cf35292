#!/usr/bin/env bash
# `chainctl up` starts a chain from its one description (with a replica),
# the chain answers an order through every hop, and SIGTERM stops it front
# to back: exit 0, every hop's pid gone, the ports file has four hops.
#   chainctl_up_test.sh CHAINCTL SERVER_BIN_DIR
set -u
chainctl=$1
bin=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/hopbudget-chainctl-up.XXXXXX")
trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/demo_test_lib.sh"

"$chainctl" up --bin="$bin" --work="$dir/work" --replica --ports-out="$dir/ports" \
  --ledger-flags="--shield-bound=5s" --gateway-flags="--request-cap=3s" \
  >"$dir/out" 2>"$dir/err" </dev/null &
pid=$!
running() { kill -0 "$pid" 2>/dev/null; }
ports_written() { [ -s "$dir/ports" ] || ! running; }
wait_for 60 ports_written || { kill -KILL "$pid"; fail "no ports file in 60 s"; }
running || fail "chainctl up ended before the chain was up"
[ "$(wc -l <"$dir/ports")" -eq 4 ] || fail "want 4 hops in the ports file: $(cat "$dir/ports")"
for hop in ledger ledger-replica orders gateway; do
  grep -qE "^$hop port [0-9]+ metrics [0-9]+ pid [0-9]+$" "$dir/ports" || fail "no line for $hop"
done
gateway=$(awk '$1 == "gateway" { print $3 }' "$dir/ports")
"$chainctl" order --gateway="127.0.0.1:$gateway" --budget=5s --key=up-1 >"$dir/order" 2>&1 ||
  { cat "$dir/order"; fail "the order through the chain failed"; }
# The extras reached their hops, after the chain's own flags.
grep -q -- "--request-cap=3s" "/proc/$(awk '$1 == "gateway" { print $7 }' "$dir/ports")/cmdline" ||
  fail "the gateway's extra flag is not on its command line"
hops=$(awk '{ print $7 }' "$dir/ports")
kill -TERM "$pid"
stopped() { ! running; }
wait_for 60 stopped || { kill -KILL "$pid"; fail "still running 60 s after SIGTERM"; }
wait "$pid"
rc=$?
[ "$rc" -eq 0 ] || fail "exit status $rc, want 0"
for h in $hops; do
  kill -0 "$h" 2>/dev/null && fail "hop pid $h still running"
done
echo "ok: 4 hops up, an order through them, exit 0 after SIGTERM, nothing left running"
