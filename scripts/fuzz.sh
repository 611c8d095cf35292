#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each one for
# a bounded time on a seed corpus. Exits non-zero on the first crash.
#
#   ./scripts/fuzz.sh [--seconds N]    # default 60 per target
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
cd "$(hopbudget_root)"

seconds=60
if [ "${1:-}" = "--seconds" ]; then seconds="$2"; fi

ensure_packages "${HOPBUDGET_BUILD_PACKAGES[@]}" "${HOPBUDGET_FUZZ_PACKAGES[@]}"
build=build/fuzz
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
  -DHOPBUDGET_BUILD_FUZZERS=ON -DHOPBUDGET_SANITIZE=ON -DHOPBUDGET_BUILD_TESTS=OFF \
  -DHOPBUDGET_BUILD_EXAMPLES=OFF -DHOPBUDGET_BUILD_BENCHMARKS=OFF
targets=(budget_header_fuzzer status_details_fuzzer attribution_message_fuzzer)
cmake --build "$build" -j "$(jobs)" --target "${targets[@]}"

# Seeds: one valid and a few near-valid inputs per target, made here rather
# than committed, so the repository holds no generated files.
seed() { mkdir -p "$build/corpus/$1"; printf '%s' "$2" > "$build/corpus/$1/seed$3"; }
seed budget_header_fuzzer "1500000" 1
seed budget_header_fuzzer "-1" 2
seed budget_header_fuzzer "99999999999999999999" 3
seed attribution_message_fuzzer "hopbudget: source=attempt hop=orders budget_ms=300 elapsed_ms=301" 1
seed attribution_message_fuzzer "hopbudget: source=downstream budget_ms=0 elapsed_ms=0 (x)" 2
printf '\x08\x04\x12\x01m\x1a\x6c\x0a\x28type.googleapis.com/google.rpc.ErrorInfo\x12\x40\x0a\x18ATTEMPT_BUDGET_EXHAUSTED\x12\x09hopbudget\x1a\x0f\x0a\x03hop\x12\x08orders__' \
  > "$build/corpus/status_details_fuzzer.seed" 2>/dev/null || true
mkdir -p "$build/corpus/status_details_fuzzer"
mv "$build/corpus/status_details_fuzzer.seed" "$build/corpus/status_details_fuzzer/seed1"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
for t in "${targets[@]}"; do
  echo "==> fuzzing $t for ${seconds}s"
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$build/$t-" "$build/corpus/$t" 2>&1 | tail -4
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "fuzz: $t found a crash (see $build/$t-*)"; exit 1; }
done
echo "fuzz: ${#targets[@]} targets ran ${seconds}s each without a crash"
