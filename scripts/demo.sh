#!/usr/bin/env bash
# Runs a three-hop chain on this machine (gateway -> orders -> ledger, the
# example relay servers of examples/) and shows hopbudget at work: a retry cut
# to its attempt budget that rescues a call from a dead peer, budgets that nest
# hop by hop, a call refused before it touches the network, and the
# attribution of every DEADLINE_EXCEEDED.
#
#   ./scripts/demo.sh          # runs the scenarios, then keeps the chain up until Ctrl-C
#   ./scripts/demo.sh --once   # exits after the scenarios: 0 if the chain behaved as expected
#
# (The full demo chain with a SQLite ledger replaces this once it exists.)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
cd "$(hopbudget_root)"

once=0
[ "${1:-}" = "--once" ] && once=1

ensure_packages "${HOPBUDGET_BUILD_PACKAGES[@]}"
build=build/demo
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHOPBUDGET_BUILD_TESTS=OFF -DHOPBUDGET_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build" -j "$(jobs)" --target hopbudget_minimal_server hopbudget_minimal_client

server="$build/examples/hopbudget_minimal_server"
client="$build/examples/hopbudget_minimal_client"
logs=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$logs"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME ARGS...: starts a hop on a free port, echoes its port.
start() {
  local name=$1
  shift
  "$server" --port=0 --hop="$name" "$@" >"$logs/$name.log" 2>&1 &
  pids+=($!)
  local port=""
  for _ in $(seq 1 100); do
    port=$(sed -n 's/^listening on \([0-9]*\).*/\1/p' "$logs/$name.log" | head -1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { echo "demo: $name did not start"; cat "$logs/$name.log"; exit 1; }
  echo "$port"
}

ledger=$(start ledger --hang-first=1)
orders=$(start orders --next="127.0.0.1:$ledger" --min-budget-ms=50 \
  --retry-attempts=3 --attempt-cap-ms=150)
gateway=$(start gateway --next="127.0.0.1:$orders")
echo "chain: gateway :$gateway -> orders :$orders -> ledger :$ledger"
echo "       orders: retries ledger up to 3 attempts of at most 150 ms each, within what is"
echo "               left of the request, and starts no call with less than 50 ms"
echo "       ledger: its first call hangs (a dead peer)"

failures=0
# scenario TITLE EXPECT(ok|error) EXPECT_TEXT CLIENT_ARGS...
scenario() {
  local title=$1 expect=$2 text=$3
  shift 3
  echo
  echo "== $title"
  echo "   \$ hopbudget_minimal_client --target=127.0.0.1:$gateway $*"
  local out rc=0
  out=$("$client" --target="127.0.0.1:$gateway" "$@" 2>&1) || rc=$?
  echo "$out" | sed 's/^/   /'
  if { [ "$expect" = ok ] && [ $rc -ne 0 ]; } || { [ "$expect" = error ] && [ $rc -eq 0 ]; } ||
     ! grep -q -- "$text" <<<"$out"; then
    echo "   !! expected $expect with \"$text\""
    failures=$((failures + 1))
  fi
}

scenario "A hanging ledger: orders cuts attempt 1 at its 150 ms attempt budget, attempt 2 succeeds" \
  ok "ledger" --budget-ms=800 --work-ms=0,0,0
grep -h "retry\|hangs" "$logs/ledger.log" | sed 's/^/   /'
grep -q "grpc-previous-rpc-attempts=1" "$logs/ledger.log" ||
  { echo "   !! expected the ledger to see a retry"; failures=$((failures + 1)); }
scenario "One deadline, shrinking hop by hop (each hop keeps a reserve)" \
  ok "ledger" --budget-ms=800 --work-ms=20,20,20
scenario "Too little left for the last call: orders fails it without touching the network" \
  error "exhausted-before-call" --budget-ms=200 --work-ms=10,150,0
scenario "A slow ledger: each attempt is cut at orders' 150 ms attempt budget, retried while budget lasts" \
  error "source=attempt hop=orders" --budget-ms=5000 --work-ms=0,0,2000
scenario "The client's budget runs out while the ledger works" \
  error "DEADLINE_EXCEEDED" --budget-ms=150 --work-ms=0,0,250

echo
if [ $failures -eq 0 ]; then
  echo "demo: every scenario behaved as expected"
else
  echo "demo: $failures scenario(s) did not behave as expected"
fi
if [ $once -eq 1 ]; then
  [ $failures -eq 0 ]
  exit
fi
echo
echo "The chain keeps running. Try:"
echo "  $client --target=127.0.0.1:$gateway --budget-ms=500 --work-ms=50,50,50"
echo "Ctrl-C stops it."
while true; do sleep 3600; done
