#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each one for
# a bounded time on its checked-in seed corpus. Exits non-zero on the first crash.
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
targets=(budget_header_fuzzer attribution_message_fuzzer status_details_fuzzer
         trace_trailer_fuzzer retry_pushback_fuzzer service_config_fuzzer)
cmake --build "$build" -j "$(jobs)" --target "${targets[@]}"

# Seeds: the checked-in corpus (tests/fuzz/corpus/<target>, also replayed by
# ctest in every test build), copied so that what libFuzzer adds stays out of
# the source tree.
for t in "${targets[@]}"; do
  rm -rf "$build/corpus/$t"
  mkdir -p "$build/corpus"
  cp -r "tests/fuzz/corpus/$t" "$build/corpus/$t"
done

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
for t in "${targets[@]}"; do
  echo "==> fuzzing $t for ${seconds}s"
  status=0
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$build/$t-" "$build/corpus/$t" >"$build/$t.log" 2>&1 || status=$?
  tail -4 "$build/$t.log"
  if [ "$status" -ne 0 ]; then
    # What failed and the input, in this log: CI keeps only what is printed.
    grep -E "^(==[0-9]+==ERROR|SUMMARY|$t: )|^ +#[0-9]+ .* [^ ]*\.(cc|h):[0-9]+" "$build/$t.log" |
      grep -v -E "/(llvm|gcc|libfuzzer|compiler-rt)|/usr/" | head -20 || true
    for a in "$build/$t"-*; do
      [ -f "$a" ] && { echo "input $a, base64:"; base64 -w 0 "$a"; echo; }
    done
    echo "fuzz: $t found a crash (see $build/$t.log, $build/$t-*)"
    exit 1
  fi
done
echo "fuzz: ${#targets[@]} targets ran ${seconds}s each without a crash"
