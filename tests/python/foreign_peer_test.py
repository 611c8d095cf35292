#!/usr/bin/env python3
"""What hopbudget keeps of a peer we did not write when it times out.

The ledgers here run no hopbudget: one is a Python grpcio server, the other
go_ledger.go, a grpc-go one (built by tests/python/CMakeLists.txt). Each
answers every Relay.Call DEADLINE_EXCEEDED with its own message
(the request's payload, so the test chooses it) and its own
google.rpc.Status in grpc-status-details-bin: an ErrorInfo of its domain and
a DebugInfo. In front of each ledger, foreign_peer_hops runs real hopbudget
hops:

    Python caller -> gateway -> orders -> ledger

For each ledger, message and path (through orders alone, through gateway and
orders), the caller must see: the attribution (downstream, origin unknown)
in the status message, with the ledger's text after it once, in one pair of
parentheses, at most 256 bytes (cut on a UTF-8 boundary and marked); in the
details, hopbudget's ErrorInfo first, then the ledger's own details as it
sent them; and no hop may count hopbudget_bad_attribution_total (a
well-formed foreign status is not malformed attribution). Decoded with
nothing but proto/hopbudget/status.proto (the contract is in
interceptors/core/include/hopbudget/advanced/attribution.h).

Run by ctest (tests/python/CMakeLists.txt):
  python3 foreign_peer_test.py --hops PATH/foreign_peer_hops --proto-dir DIR
      --go-ledger PATH/go_ledger
"""
import argparse
import subprocess
import sys
import tempfile
import unittest
from concurrent import futures

import hopbudget_testlib as testlib

grpc = testlib.require_grpc("foreign_peer_test")

ARGS = None
PB = {}  # generated modules, by short name
LEDGERS = {}  # ledger kind -> {hop name: address} of the hops in front of it
PROCS = {}  # ledger kind -> foreign_peer_hops Popen

MESSAGE = testlib.MESSAGE  # the status message grammar, version 1
ERROR_INFO_URL = "type.googleapis.com/google.rpc.ErrorInfo"
DEBUG_INFO_URL = "type.googleapis.com/google.rpc.DebugInfo"
# google.rpc.DebugInfo{detail: "db1 primary"}: no proto of it here, so bytes.
DEBUG_INFO = b"\x12\x0bdb1 primary"
# attribution.h: kMaxNoteBytes, kNoteTruncatedMarker.
MAX_NOTE_BYTES = 256
TRUNCATED_MARKER = " [truncated]"

# What the ledger says, by scenario (formatted with the ledger's kind).
MESSAGES = {
    "short-message": "{} ledger: database timed out",
    # Longer than the note keeps, with 2-byte characters across the cut.
    "long-message": "{} ledger: " + "\u00e9" * 300,
}

PATHS = {"through-orders": ("orders", 2), "through-gateway-and-orders": ("gateway", 3)}


def ledger_error_info():
    return PB["status"].ErrorInfo(domain="ledger.example.com", reason="DB_TIMEOUT",
                                  metadata={"table": "ledger_entries"})


def ledger_status(message):
    """The ledger's own google.rpc.Status, as grpcio-status or grpc-go's
    status.WithDetails writes it."""
    status = PB["status"].Status(code=4, message=message)
    status.details.add(type_url=ERROR_INFO_URL, value=ledger_error_info().SerializeToString())
    status.details.add(type_url=DEBUG_INFO_URL, value=DEBUG_INFO)
    return status


def make_python_ledger():
    class Ledger(PB["relay_grpc"].RelayServicer):
        def Call(self, request, context):
            context.set_trailing_metadata(
                (("grpc-status-details-bin", ledger_status(request.payload).SerializeToString()),))
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, request.payload)
    return Ledger()


def bad_attribution(ledger):
    """{hop: hopbudget_bad_attribution_total} of the hops in front of `ledger`."""
    proc = PROCS[ledger]
    proc.stdin.write("counters\n")
    proc.stdin.flush()
    fields = proc.stdout.readline().split()
    if not fields or fields[0] != "bad_attribution":
        raise AssertionError(f"foreign_peer_hops answered {fields!r}")
    return {hop: int(n) for hop, n in (f.split("=") for f in fields[1:])}


def expected_note(text):
    """What attribution.h says a relayed message keeps of `text`."""
    raw = text.encode()
    if len(raw) <= MAX_NOTE_BYTES:
        return text
    cut = MAX_NOTE_BYTES - len(TRUNCATED_MARKER)
    while cut > 0 and raw[cut] & 0xC0 == 0x80:
        cut -= 1
    return raw[:cut].decode() + TRUNCATED_MARKER


class ForeignPeerTest(unittest.TestCase):

    def check(self, ledger, scenario, path):
        front, hops = PATHS[path]
        callee_text = MESSAGES[scenario].format(ledger)
        before = bad_attribution(ledger)
        with grpc.insecure_channel(LEDGERS[ledger][front]) as channel:
            stub = PB["relay_grpc"].RelayStub(channel)
            request = PB["relay"].RelayRequest(payload=callee_text,
                                               steps=[PB["relay"].Step()] * hops)
            with self.assertRaises(grpc.RpcError) as raised:
                stub.Call(request, timeout=10.0)
        e = raised.exception
        message, trailers = e.details() or "", dict(e.trailing_metadata() or ())
        self.assertEqual(e.code(), grpc.StatusCode.DEADLINE_EXCEEDED, message)

        # The message: the attribution, then the ledger's text once.
        m = MESSAGE.match(message)
        self.assertIsNotNone(m, f"status message {message!r} does not match the grammar")
        self.assertEqual(m["source"], "downstream", message)
        self.assertIsNone(m["hop"], message)
        note = expected_note(callee_text)
        self.assertEqual(message, f"{m.group(0).rstrip()} ({note})")
        self.assertLessEqual(len(note.encode()), MAX_NOTE_BYTES)
        self.assertEqual(message.count(f"{ledger} ledger: "), 1, message)
        self.assertEqual(message.count("("), 1, message)

        # The details: hopbudget's ErrorInfo first, then the ledger's own.
        self.assertIn("grpc-status-details-bin", trailers, message)
        status = PB["status"].Status()
        status.ParseFromString(trailers["grpc-status-details-bin"])
        self.assertEqual(status.code, 4)
        self.assertEqual(status.message, message)
        self.assertEqual([d.type_url for d in status.details],
                         [ERROR_INFO_URL, ERROR_INFO_URL, DEBUG_INFO_URL], status)
        ours, theirs = PB["status"].ErrorInfo(), PB["status"].ErrorInfo()
        ours.ParseFromString(status.details[0].value)
        self.assertEqual(ours.domain, "hopbudget")
        self.assertEqual(ours.reason, "DOWNSTREAM_DEADLINE_EXCEEDED")
        self.assertEqual(dict(ours.metadata),
                         {"source": "downstream", "budget_ms": "0", "elapsed_ms": "0"})
        theirs.ParseFromString(status.details[1].value)
        self.assertEqual(theirs, ledger_error_info())
        self.assertEqual(status.details[2].value, DEBUG_INFO)
        self.assertEqual(trailers.get("hopbudget-source"), "downstream")

        # A well-formed foreign status is not bad attribution, at any hop.
        self.assertEqual(bad_attribution(ledger), before)
        self.assertEqual(before, {"gateway": 0, "orders": 0})


def add_scenarios():
    for ledger in LEDGERS:
        for scenario in MESSAGES:
            for path in PATHS:
                def test(self, ledger=ledger, scenario=scenario, path=path):
                    self.check(ledger, scenario, path)
                name = f"test_{ledger}_ledger_{scenario}_{path}".replace("-", "_")
                setattr(ForeignPeerTest, name, test)


def start_hops(ledger, address):
    """foreign_peer_hops in front of the ledger at `address`."""
    proc = subprocess.Popen([ARGS.hops, address], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    PROCS[ledger] = proc
    LEDGERS[ledger] = {}
    for _ in range(2):
        fields = proc.stdout.readline().split()
        if len(fields) != 2:
            sys.exit(f"foreign_peer_test: foreign_peer_hops printed {fields!r}")
        LEDGERS[ledger][fields[0]] = fields[1]


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--hops", required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--go-ledger", required=True, help="the built go_ledger")
    ARGS, rest = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as out:
        PB.update(testlib.compile_protos("foreign_peer_test", ARGS.proto_dir, out))
        python_ledger = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        PB["relay_grpc"].add_RelayServicer_to_server(make_python_ledger(), python_ledger)
        port = python_ledger.add_insecure_port("127.0.0.1:0")
        python_ledger.start()
        go_ledger = None
        ok = True
        try:
            start_hops("python", f"127.0.0.1:{port}")
            go_ledger = subprocess.Popen([ARGS.go_ledger], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True)
            address = go_ledger.stdout.readline().strip()
            if not address:
                sys.exit("foreign_peer_test: go_ledger printed nothing")
            start_hops("go", address)
            add_scenarios()
            result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
            ok = result.wasSuccessful()
        finally:
            for ledger, proc in PROCS.items():
                proc.stdin.close()
                proc.wait(timeout=30)
                if proc.returncode != 0:
                    print(f"foreign_peer_hops ({ledger}) exited {proc.returncode}",
                          file=sys.stderr)
                    ok = False
            if go_ledger is not None:
                go_ledger.stdin.close()
                go_ledger.wait(timeout=30)
                if go_ledger.returncode != 0:
                    print(f"go_ledger exited {go_ledger.returncode}", file=sys.stderr)
                    ok = False
            python_ledger.stop(grace=None)
        sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
