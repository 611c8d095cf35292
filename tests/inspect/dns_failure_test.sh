#!/bin/sh
# hopbudget-inspect names a name that does not resolve as a DNS failure, not
# as "refused or unreachable". Run in a network namespace of its own (no
# interface but a down loopback), so that no lookup leaves the machine: the
# name fails there as it would with no DNS server answering. Needs root
# (unshare --net); exits 77 (skipped) otherwise.
#   dns_failure_test.sh PATH/TO/hopbudget-inspect
inspect=$1
unshare --net true 2>/dev/null || { echo "skipped: unshare --net needs root"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

out=$(unshare --net "$inspect" --timeout=5s no-such-host.invalid:9100 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 1 ] || fail "exit status $rc, want 1: $out"
echo "$out" | grep -q 'cannot resolve host "no-such-host.invalid" (DNS: ' ||
  fail "no DNS failure named: $out"
echo "$out" | grep -q 'refused or unreachable' && fail "said refused or unreachable: $out"

# An address (no lookup) that nobody listens on is still refused or unreachable.
out=$(unshare --net "$inspect" --timeout=5s 127.0.0.1:9 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 1 ] || fail "exit status $rc, want 1: $out"
echo "$out" | grep -q 'could not connect (refused or unreachable)' || fail "$out"
echo "ok: $out"
