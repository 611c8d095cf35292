# Sourced by the scripts in scripts/: installs the Debian packages a script
# needs (apt-get update at most once, and only when something is missing).

# Everything the library, tests, examples, demo and benchmarks build with.
HOPBUDGET_BUILD_PACKAGES=(
  g++ cmake ninja-build pkg-config
  make  # cmake's default generator: tests/consumer builds as a user's project would
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  grpc-proto libgtest-dev libgmock-dev libbenchmark-dev
  golang-google-grpc-dev  # google/rpc/code.proto, which grpc-proto's service_config.proto imports
  libcpp-httplib-dev      # hopbudget::http serves /metrics and /deadlinez
  libsqlite3-dev sqlite3  # the demo chain's ledger
  prometheus-cpp-dev      # hopbudget::prometheus, hopbudget's series in a prometheus-cpp registry
  libnghttp2-dev          # client/h2load (the demo flood's and the overload benchmark's load) and server/edge
)
# What the tests run besides the build: promtool checks the /metrics
# exposition, headless Chromium renders /deadlinez, Python grpcio calls the
# servers as a client we did not write (tests/python/).
HOPBUDGET_TEST_PACKAGES=(prometheus chromium python3-grpcio python3-grpc-tools
  python3-pkg-resources  # grpc_tools imports it, and Debian's package does not pull it in
  python3-h2  # an HTTP/2 peer that refuses streams (tests/python/h2_peer.py)
  golang-go golang-google-grpc-dev golang-google-genproto-dev  # a grpc-go peer (tests/python/)
  fonts-dejavu-core  # the only fonts of the /deadlinez layout tests (tests/browser/testdata/fonts.conf)
  nftables iproute2)  # the partition test's namespaces (ip netns) and faults (nft) (tests/partition/)
# The libFuzzer targets and the sanitizer runtime of clang.
HOPBUDGET_FUZZ_PACKAGES=(clang libclang-rt-14-dev)

# How scripts/test.sh configures its release tree (build/test) and its
# AddressSanitizer + UBSan tree (build/asan); scripts/soak.sh runs the demo
# in the same trees.
HOPBUDGET_RELEASE_CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
HOPBUDGET_ASAN_CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Debug -DHOPBUDGET_SANITIZE=ON
  -DHOPBUDGET_BUILD_BENCHMARKS=OFF)
# export_sanitizer_options: what an ASan + UBSan process runs with. gRPC's
# own globals outlive main(); leaks are checked on our code in the unit
# tests, where no gRPC runtime is involved.
export_sanitizer_options() {
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
}

hopbudget_root() { cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd; }

# ensure_packages PKG...: installs those not installed yet.
ensure_packages() {
  local missing=()
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "==> installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if [ -z "${HOPBUDGET_APT_UPDATED:-}" ]; then
    $sudo apt-get update -q
    export HOPBUDGET_APT_UPDATED=1
  fi
  # Recommends are left out: on a bare Debian 12 root they add 181 packages
  # to the 323 these lists need (smartmontools, printing, desktop services),
  # none of which a build, test or demo here uses; what a tool does need is
  # listed above by name.
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

jobs() { nproc 2>/dev/null || echo 2; }

