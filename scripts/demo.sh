#!/usr/bin/env bash
# The demo chain, end to end: a hopbudget chain and a baseline chain
# (gateway -> orders -> ledger on SQLite, each with a read replica; an edge
# in front of the hopbudget gateway), the seeds' incidents and the demo's
# other scenarios on both, side by side. docs/demo.md says what each shows;
# `chainctl demo` (client/chainctl/demo_command.cc) runs them. This script
# installs what the build needs, builds, and runs it.
#
#   ./scripts/demo.sh          # report, then keeps both chains up until Ctrl-C
#   ./scripts/demo.sh --once   # exits after the report: 0 if every check passed
#                              # and every service stopped cleanly on SIGTERM
#
# HOPBUDGET_DEMO_BUILD_DIR overrides the build directory (default build/demo).
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
cd "$(hopbudget_root)"

once=()
case "${1:-}" in
  --once) once=(--once) ;;
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
cmake --build "$build" -j "$(jobs)" --target gateway orders ledger edge chainctl h2_load \
  hopbudget-lint >/dev/null

# exec: the demo is this process (a signal sent to the script reaches it).
exec "$build/client/chainctl/chainctl" demo --bin="$build/server" \
  --h2load="$build/client/h2load/h2_load" --lint="$build/client/lint/hopbudget-lint" \
  --config-dir=server/config "${once[@]}"
