# Sourced by the tests that run scripts/demo.sh (demo_*_test.sh): the
# demo's output is in $dir/out and $dir/err.

# fail MESSAGE: the test fails, with the demo's output.
fail() {
  echo "FAIL: $*"
  echo "--- stdout"; cat "$dir/out"; echo "--- stderr"; cat "$dir/err"
  exit 1
}
# wait_for SECONDS CONDITION...: until the condition holds, polling.
wait_for() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.1
  done
}
