#!/usr/bin/env bash
# Builds hopbudget and runs every test with ctest, on a fresh Debian 12
# machine: installs what is missing first.
#
#   ./scripts/test.sh              # release build in build/test
#   ./scripts/test.sh --sanitize   # AddressSanitizer + UBSan build in build/asan
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
cd "$(hopbudget_root)"

build_dir=build/test
cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ "${1:-}" = "--sanitize" ]; then
  build_dir=build/asan
  cmake_args=(-DCMAKE_BUILD_TYPE=Debug -DHOPBUDGET_SANITIZE=ON -DHOPBUDGET_BUILD_BENCHMARKS=OFF)
  # gRPC's own globals outlive main(); leaks are checked on our code in the
  # unit tests, where no gRPC runtime is involved.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
fi

ensure_packages "${HOPBUDGET_BUILD_PACKAGES[@]}" "${HOPBUDGET_TEST_PACKAGES[@]}"
cmake -S . -B "$build_dir" -G Ninja "${cmake_args[@]}"
cmake --build "$build_dir" -j "$(jobs)"
ctest --test-dir "$build_dir" --output-on-failure -j 2 --timeout 300
