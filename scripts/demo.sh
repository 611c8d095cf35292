#!/usr/bin/env bash
# The demo chain, end to end: gateway -> orders -> ledger (SQLite), twice:
# a hopbudget chain (one deadline, derived budgets, budget-aware retries,
# a bounded shield around the commit) and a baseline chain (a constant
# timeout per hop, a naive retry loop, a commit nothing can stop). Runs the
# seeds' incidents on both, side by side (fixed faults), checks that the
# client deadline header the late-work figures are measured by reaches every
# hop, runs a short mixed load with random faults, audits both ledgers (every
# order at most once, by key and by content; every acknowledged one exactly
# once), and shows where to look.
#
#   ./scripts/demo.sh          # report, then keeps both chains up until Ctrl-C
#   ./scripts/demo.sh --once   # exits after the report: 0 if every check passed
#
# HOPBUDGET_DEMO_BUILD_DIR overrides the build directory (default build/demo).
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
cd "$(hopbudget_root)"

once=0
case "${1:-}" in
  --once) once=1 ;;
  "") ;;
  *) echo "usage: $0 [--once]" >&2; exit 2 ;;
esac

ensure_packages "${HOPBUDGET_BUILD_PACKAGES[@]}"
build=${HOPBUDGET_DEMO_BUILD_DIR:-build/demo}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHOPBUDGET_BUILD_TESTS=OFF -DHOPBUDGET_BUILD_BENCHMARKS=OFF >/dev/null
fi
echo "==> building the demo chain in $build"
cmake --build "$build" -j "$(jobs)" --target gateway orders ledger chainctl >/dev/null

bin="$build/server"
chainctl="$build/client/chainctl/chainctl"
work=$(mktemp -d "${TMPDIR:-/tmp}/hopbudget-demo.XXXXXX")
pids=()     # the services
current=""  # the step running now (see step)
# tree PID: PID and every process below it.
tree() {
  local c
  echo "$1"
  for c in $(pgrep -P "$1" 2>/dev/null); do tree "$c"; done
}
cleanup() {
  local p
  if [ -n "$current" ]; then
    # The step first, all of it at once (its chainctl too): stopped before
    # the services, it never reports a service that went away.
    kill $(tree "$current") 2>/dev/null || true
    wait "$current" 2>/dev/null || true
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "demo: interrupted, stopping the chains" >&2; exit 130' INT
trap 'echo "demo: terminated, stopping the chains" >&2; exit 143' TERM
# step CMD...: runs one step of the demo and waits for it. In the
# background, because bash runs a trap only once the foreground command has
# ended: a SIGINT sent to this script alone (no terminal, so no signal to
# the whole process group) would otherwise let the step, and the steps after
# it, run on. `wait` returns at once on a trapped signal; cleanup stops the
# step.
step() {
  local rc=0
  "$@" &
  current=$!
  wait "$current" || rc=$?
  current=""
  return $rc
}

# start LABEL BINARY ARGS...: starts a service on free ports, waits for its
# ready line; sets $port and $mport.
start() {
  local label=$1 binary=$2
  shift 2
  "$bin/$binary" --port=0 --metrics-port=0 --seed=42 "$@" \
    >"$work/$label.out" 2>"$work/$label.err" &
  pids+=($!)
  local line=""
  for _ in $(seq 1 200); do
    line=$(grep -m1 " listening on " "$work/$label.out" 2>/dev/null || true)
    [ -n "$line" ] && break
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.05
  done
  if [ -z "$line" ]; then
    echo "demo: $label did not start:" >&2
    cat "$work/$label.err" >&2
    exit 1
  fi
  port=$(awk '{print $4}' <<<"$line")
  mport=$(awk '{print $7}' <<<"$line")
}

declare -A P M
# The hopbudget chain: gateway caps requests at 2 s, orders gives each
# ledger attempt at most 300 ms (3 attempts), the ledger bounds a commit at 600 ms.
start hb-ledger ledger --name=ledger --db="$work/hopbudget.db" --shield-bound=600ms
P[hb-ledger]=$port M[hb-ledger]=$mport
# Each hop's /deadlinez links to the one below it.
start hb-orders orders --name=orders --ledger="127.0.0.1:${P[hb-ledger]}" \
  --attempt-cap=300ms --max-attempts=3 \
  --peers="ledger=http://127.0.0.1:${M[hb-ledger]}/deadlinez"
P[hb-orders]=$port M[hb-orders]=$mport
start hb-gateway gateway --name=gateway --orders="127.0.0.1:${P[hb-orders]}" --request-cap=2s \
  --peers="orders=http://127.0.0.1:${M[hb-orders]}/deadlinez,ledger=http://127.0.0.1:${M[hb-ledger]}/deadlinez"
P[hb-gateway]=$port M[hb-gateway]=$mport
# The baseline chain: every hop gives the next a constant 1 s timeout, orders
# retries 3 times with 1 s each (inside the gateway's 1 s: the seeds' incident).
start bl-ledger ledger --name=ledger --mode=baseline --db="$work/baseline.db"
P[bl-ledger]=$port M[bl-ledger]=$mport
start bl-orders orders --name=orders --mode=baseline --ledger="127.0.0.1:${P[bl-ledger]}" \
  --baseline-timeout=1s --baseline-attempts=3
P[bl-orders]=$port M[bl-orders]=$mport
start bl-gateway gateway --name=gateway --mode=baseline --orders="127.0.0.1:${P[bl-orders]}" \
  --baseline-timeout=1s
P[bl-gateway]=$port M[bl-gateway]=$mport

hb="127.0.0.1:${P[hb-gateway]},127.0.0.1:${P[hb-orders]},127.0.0.1:${P[hb-ledger]}"
bl="127.0.0.1:${P[bl-gateway]},127.0.0.1:${P[bl-orders]},127.0.0.1:${P[bl-ledger]}"
echo
echo "chains (gRPC ports; each also serves Admin, health and reflection):"
printf "  %-10s gateway :%-6s -> orders :%-6s -> ledger :%-6s  db %s\n" \
  hopbudget "${P[hb-gateway]}" "${P[hb-orders]}" "${P[hb-ledger]}" "$work/hopbudget.db"
printf "  %-10s gateway :%-6s -> orders :%-6s -> ledger :%-6s  db %s\n" \
  baseline "${P[bl-gateway]}" "${P[bl-orders]}" "${P[bl-ledger]}" "$work/baseline.db"

failures=0
echo
echo "==> one order on the hopbudget chain (result and per-hop budget waterfall)"
first_order() {
  "$chainctl" order --gateway "127.0.0.1:${P[hb-gateway]}" --budget 800ms --key demo-first \
    --item sku-1:2,sku-2:1 | sed 's/^/   /'
}
step first_order || { echo "   !! the order failed"; failures=$((failures + 1)); }

echo
echo "==> the seeds' incidents, baseline vs hopbudget"
step "$chainctl" scenarios --hopbudget "$hb" --baseline "$bl" --orders 3 \
  --hopbudget-requests-out "$work/scenarios-hopbudget.tsv" \
  --baseline-requests-out "$work/scenarios-baseline.tsv" ||
  failures=$((failures + 1))

# probe LABEL GATEWAY ADMIN: the demo's "after the client deadline" figures
# are measured through the header x-demo-client-deadline-us; one order sent
# with that deadline already past must be counted late at every hop, or a
# zero below would measure nothing.
probe() {
  local label=$1 gateway=$2 admin=$3 out
  if step "$chainctl" probe --gateway "$gateway" --admin "$admin" >"$work/probe.out"; then
    echo "   ok   $label: the client deadline reaches every hop (an order sent late counts late at each)"
  else
    echo "   !!   $label: the client deadline does not reach every hop:"
    sed 's/^/          /' "$work/probe.out"
    failures=$((failures + 1))
  fi
}

# load LABEL GATEWAY ADMIN: 4 s of open-loop load with faults at the ledger.
load() {
  local label=$1 gateway=$2 admin=$3 ledger=${3##*,}
  "$chainctl" faults --admin "$ledger" --clear --latency exp:30ms --error-rate 0.1 --hang 0.05 \
    >/dev/null
  echo "-- $label chain"
  run_load() {
    "$chainctl" load --gateway "$gateway" --rps 40 --duration 4s --budget 800ms \
      --admin "$admin" --json "$work/load-$label.json" --requests-out "$work/load-$label.tsv" \
      --key-prefix "load-$label" --quiet | sed 's/^/   /'
  }
  step run_load
  "$chainctl" faults --admin "$ledger" --clear >/dev/null
}
# key FILE NAME: a top-level number of a load summary JSON.
key() { grep -o "\"$2\":[0-9.]*" "$1" | head -1 | cut -d: -f2; }
# audit LABEL DB: every order of the scenarios and the load in the ledger at
# most once, found by its key and by its content (each carries an item
# ref-<key>), and every acknowledged one exactly once, with the order_id it
# was answered.
audit() {
  local label=$1 db=$2 out
  # (a file is missing only when its step failed, which was counted there)
  cat "$work/scenarios-$label.tsv" "$work/load-$label.tsv" >"$work/requests-$label.tsv" 2>/dev/null || true
  if step "$chainctl" audit --db "$db" --requests "$work/requests-$label.tsv" \
    >"$work/audit-$label.out"; then
    out=$(cat "$work/audit-$label.out")
    echo "   ok   $label: every order in the ledger at most once, each acknowledged one exactly once"
    echo "          ($(head -1 <<<"$out"))"
  else
    echo "   !!   $label: the ledger does not hold each order exactly once:"
    sed 's/^/          /' "$work/audit-$label.out"
    failures=$((failures + 1))
  fi
}

echo
echo "==> the measurement first: does the client's deadline reach every hop?"
probe baseline "127.0.0.1:${P[bl-gateway]}" "$bl"
probe hopbudget "127.0.0.1:${P[hb-gateway]}" "$hb"

echo
echo "==> mixed load with faults (ledger: exp 30 ms latency, 10 % UNAVAILABLE, 5 % hangs),"
echo "    40 calls/s for 4 s, client budget 800 ms"
load baseline "127.0.0.1:${P[bl-gateway]}" "$bl"
load hopbudget "127.0.0.1:${P[hb-gateway]}" "$hb"
b_ok=$(key "$work/load-baseline.json" ok)
h_ok=$(key "$work/load-hopbudget.json" ok)
b_work=$(key "$work/load-baseline.json" work_after_deadline_ms)
h_work=$(key "$work/load-hopbudget.json" work_after_deadline_ms)
b_late=$(key "$work/load-baseline.json" calls_started_after_deadline)
h_late=$(key "$work/load-hopbudget.json" calls_started_after_deadline)
h_retries=$(key "$work/load-hopbudget.json" retries)
echo
echo "   the two runs draw their faults at random: these numbers vary from run to run"
echo "   (the scenarios above compare the modes on the same fixed faults)"
printf "   %-42s %-12s %s\n" "" baseline hopbudget
printf "   %-42s %-12s %s\n" "ok" "$b_ok" "$h_ok"
printf "   %-42s %-12s %s\n" "calls started after the client deadline" "$b_late" "$h_late"
printf "   %-42s %-12s %s\n" "work after the client deadline (ms)" "$b_work" "$h_work"
check() {
  if eval "$1"; then echo "   ok   $2"; else echo "   !!   $2"; failures=$((failures + 1)); fi
}
check '[ "$h_late" = 0 ]' "hopbudget: no call started after the client deadline"
check '[ "${h_retries%.*}" -ge 1 ]' "hopbudget: retries ran"
audit baseline "$work/baseline.db"
audit hopbudget "$work/hopbudget.db"

echo
echo "where to look:"
for s in hb-gateway hb-orders hb-ledger bl-gateway bl-orders bl-ledger; do
  if [ "${M[$s]}" != 0 ]; then
    printf "  %-11s http://127.0.0.1:%s/metrics   http://127.0.0.1:%s/deadlinez\n" \
      "$s" "${M[$s]}" "${M[$s]}"
  fi
done
echo "try:"
echo "  $chainctl order --gateway 127.0.0.1:${P[hb-gateway]} --budget 800ms --key my-order"
echo "  $chainctl faults --admin 127.0.0.1:${P[hb-ledger]} --hang 0.2 --latency exp:50ms"
echo "  $chainctl load --gateway 127.0.0.1:${P[hb-gateway]} --rps 50 --duration 10s --budget 800ms --admin $hb"
echo "  $chainctl stats --admin $hb"
if [ "${M[hb-gateway]}" != 0 ]; then
  echo "  $chainctl metrics --targets 127.0.0.1:${M[hb-gateway]},127.0.0.1:${M[hb-orders]},127.0.0.1:${M[hb-ledger]}"
fi
echo "  sqlite3 $work/hopbudget.db 'SELECT * FROM orders ORDER BY order_id DESC LIMIT 5'"
echo
if [ $failures -eq 0 ]; then
  echo "demo: the chain behaved as expected"
else
  echo "demo: $failures check(s) did not behave as expected"
fi
if [ $once -eq 1 ]; then
  [ $failures -eq 0 ]
  exit
fi
echo "The chains keep running; Ctrl-C stops them."
while true; do
  step sleep 3600 || true
done
