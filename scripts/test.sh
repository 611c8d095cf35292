#!/usr/bin/env bash
# Builds hopbudget and runs every test with ctest, on a fresh Debian 12
# machine: installs what is missing first.
#
#   ./scripts/test.sh              # release build in build/test
#   HOPBUDGET_WERROR=1 ./scripts/test.sh   # the same, a warning is an error (CI)
#   ./scripts/test.sh --sanitize   # AddressSanitizer + UBSan build in build/asan
#   ./scripts/test.sh --tsan       # ThreadSanitizer build in build/tsan: the tests
#                                  # listed in tsan_targets below (docs/testing.md)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"
cd "$(hopbudget_root)"

build_dir=build/test
cmake_args=("${HOPBUDGET_RELEASE_CMAKE_ARGS[@]}")
# HOPBUDGET_WERROR=1 (.ci/run sets it): a compiler warning fails the release
# build. Passed either way, so that a tree configured once follows it.
cmake_args+=(-DHOPBUDGET_WERROR="$([ "${HOPBUDGET_WERROR:-0}" = 1 ] && echo ON || echo OFF)")
if [ "${1:-}" = "--sanitize" ]; then
  build_dir=build/asan
  cmake_args=("${HOPBUDGET_ASAN_CMAKE_ARGS[@]}" -DHOPBUDGET_WERROR=OFF)
  export_sanitizer_options
fi

if [ "${1:-}" = "--tsan" ]; then
  build_dir=build/tsan
  cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DHOPBUDGET_TSAN=ON -DHOPBUDGET_BUILD_BENCHMARKS=OFF
    -DHOPBUDGET_BUILD_EXAMPLES=OFF -DHOPBUDGET_BUILD_HTTP=OFF -DHOPBUDGET_BUILD_DEMO=OFF)
  # The TSan build holds the unit tests and the integration tests TSan can
  # judge (tests/CMakeLists.txt, HOPBUDGET_TSAN_LEFT_OUT; docs/testing.md);
  # gRPC's and Abseil's own libraries are suppressed by tests/tsan.supp.
  export TSAN_OPTIONS="${TSAN_OPTIONS:-suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1 history_size=4}"
  ensure_packages "${HOPBUDGET_BUILD_PACKAGES[@]}" "${HOPBUDGET_TEST_PACKAGES[@]}"
  cmake -S . -B "$build_dir" -G Ninja "${cmake_args[@]}"
  cmake --build "$build_dir" -j "$(jobs)"
  # What TSan leaves out, binaries and single tests, is listed once, in
  # tests/CMakeLists.txt.
  ctest --test-dir "$build_dir" --output-on-failure -j 2 --timeout 300
  exit 0
fi

ensure_packages "${HOPBUDGET_BUILD_PACKAGES[@]}" "${HOPBUDGET_TEST_PACKAGES[@]}"
cmake -S . -B "$build_dir" -G Ninja "${cmake_args[@]}"
cmake --build "$build_dir" -j "$(jobs)"
ctest --test-dir "$build_dir" --output-on-failure -j 2 --timeout 300
