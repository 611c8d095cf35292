#!/usr/bin/env python3
"""The demo chain's WatchOrder stream, seen from Python grpcio.

Starts two demo chains as real processes on loopback (port 0 each):

    hopbudget: gateway (--stream-idle=500ms) -> orders (--stream-idle=300ms) -> ledger
    baseline:  gateway -> orders -> ledger   (--mode=baseline: no idle budget,
                                              a constant 1 s timeout per hop)

The ledger sends the order's state every --watch-interval (50 ms here);
orders and gateway relay it. The test watches an order from Python, checks
the messages arrive through the three hops, then makes the ledger silent
(the `silence` fault, set through Admin SetFaults; the stream stays open)
and checks what the caller gets: on the hopbudget chain DEADLINE_EXCEEDED,
source idle, hop orders (the hop that saw the silence) in every form
hopbudget sends (status message grammar, google.rpc.Status in
grpc-status-details-bin, the hopbudget-* trailers), at orders' idle budget
after the last message; on the baseline chain, nothing until the client's
own deadline. Also `chainctl watch`, which prints the same.

The status grammar, the proto compilation of hopbudget's own protos and the
details decoder come from hopbudget_testlib.py, shared with the other
Python tests.

Run by ctest (tests/python/CMakeLists.txt):
  python3 demo_watch_test.py --gateway PATH/gateway --orders PATH/orders \
      --ledger PATH/ledger --chainctl PATH/chainctl --proto-dir DIR
"""
import argparse
import importlib
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hopbudget_testlib as testlib  # noqa: E402

grpc = testlib.require_grpc("demo_watch_test")
from grpc_tools import protoc  # noqa: E402

ARGS = None
PB = {}
CHAINS = {}  # mode -> {"gateway": "127.0.0.1:P", "orders": ..., "ledger": ...}
PROCS = []  # Popen, in start order
TMP = None

IDLE_ORDERS_MS, IDLE_GATEWAY_MS = 300, 500
# How late the idle cut may reach the caller after the last message: the
# timer fires at orders on time, then the cut travels up through the
# gateway; on a loaded 2-core machine that adds scheduling delays. A cut
# from the gateway's budget (500 ms) would fail the attribution check, one
# from the deadline (5 s, capped at 2 s by the gateway) this bound.
EARLY_MS, LATE_MS = 20, 1000


def compile_demo_proto(proto_dir, out_dir):
    PB.update(testlib.compile_protos("demo_watch_test", proto_dir, out_dir))  # status, trace, echo
    args = ["protoc", f"-I{proto_dir}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
            os.path.join(proto_dir, "demo/demo.proto")]
    if protoc.main(args) != 0:
        sys.exit("demo_watch_test: protoc failed on demo/demo.proto")
    PB["demo"] = importlib.import_module("demo.demo_pb2")
    PB["demo_grpc"] = importlib.import_module("demo.demo_pb2_grpc")


def start(binary, label, *flags):
    """Starts one demo service on free ports; returns its gRPC address."""
    err = open(os.path.join(TMP, f"{label}.err"), "w")
    proc = subprocess.Popen([binary, "--port=0", "--metrics-port=0", *flags],
                            stdout=subprocess.PIPE, stderr=err, text=True)
    PROCS.append(proc)
    line = proc.stdout.readline()
    m = re.match(r"^\S+ listening on (\d+) metrics on (\d+)", line)
    if m is None:
        err.flush()
        with open(err.name) as f:
            sys.exit(f"demo_watch_test: {label} printed {line!r}; stderr: {f.read()}")
    return f"127.0.0.1:{m.group(1)}"


def start_chain(mode, idle):
    m = f"--mode={mode}"
    ledger = start(ARGS.ledger, f"{mode}-ledger", m, f"--db={TMP}/{mode}.db",
                   "--watch-interval=50ms")
    orders_flags = [m, f"--ledger={ledger}"]
    gateway_flags = [m]
    if idle:
        orders_flags.append(f"--stream-idle={IDLE_ORDERS_MS}ms")
        gateway_flags.append(f"--stream-idle={IDLE_GATEWAY_MS}ms")
    orders = start(ARGS.orders, f"{mode}-orders", *orders_flags)
    gateway = start(ARGS.gateway, f"{mode}-gateway", f"--orders={orders}", *gateway_flags)
    CHAINS[mode] = {"gateway": gateway, "orders": orders, "ledger": ledger}


def place(mode, key):
    d = PB["demo"]
    with grpc.insecure_channel(CHAINS[mode]["gateway"]) as ch:
        return PB["demo_grpc"].GatewayStub(ch).PlaceOrder(
            d.Order(key=key, items=[d.Item(sku="sku-1", quantity=1)]), timeout=5)


def set_silence(mode, on):
    with grpc.insecure_channel(CHAINS[mode]["ledger"]) as ch:
        got = PB["demo_grpc"].AdminStub(ch).SetFaults(
            PB["demo"].SetFaultsRequest(faults=PB["demo"].Faults(latency="none", silence=on)),
            timeout=10)
    assert got.silence == on, got


def watch(mode, key, timeout, after=None):
    """Watches `key` through `mode`'s gateway to the stream's end; `after(n)`
    runs after the n-th message. Returns (messages, arrival times, code,
    details, trailers, start, end), times from time.monotonic()."""
    with grpc.insecure_channel(CHAINS[mode]["gateway"]) as ch:
        stub = PB["demo_grpc"].GatewayStub(ch)
        start = time.monotonic()
        stream = stub.WatchOrder(PB["demo"].OrderKey(key=key), timeout=timeout)
        messages, times = [], []
        try:
            for m in stream:
                times.append(time.monotonic())
                messages.append(m)
                if after is not None:
                    after(len(messages))
            return messages, times, grpc.StatusCode.OK, "", {}, start, time.monotonic()
        except grpc.RpcError as e:
            end = time.monotonic()
            return (messages, times, e.code(), e.details() or "",
                    dict(e.trailing_metadata() or ()), start, end)


class DemoWatchTest(unittest.TestCase):

    def test_messages_arrive_through_the_three_hops(self):
        placed = place("hopbudget", "py-watch-1")
        got, _, code, details, _, _, _ = watch("hopbudget", "py-watch-1", timeout=1.0)
        # The client's own 1 s deadline ends it (the gateway caps at 2 s).
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED, details)
        self.assertGreaterEqual(len(got), 5, details)  # ~20 at 50 ms
        self.assertEqual([m.seq for m in got], list(range(len(got))))
        for m in got:
            self.assertEqual(m.key, "py-watch-1")
            self.assertEqual(m.state, PB["demo"].OrderStatus.COMMITTED)
            self.assertEqual(m.result.order_id, placed.order_id)

    def test_a_silent_ledger_is_cut_at_orders_idle_budget(self):
        place("hopbudget", "py-watch-silent")
        try:
            got, times, code, details, trailers, _, end = watch(
                "hopbudget", "py-watch-silent", timeout=5.0,
                after=lambda n: n == 2 and set_silence("hopbudget", True))
        finally:
            set_silence("hopbudget", False)
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED, details)
        self.assertGreaterEqual(len(got), 2)
        silent_ms = (end - times[-1]) * 1000
        self.assertGreaterEqual(silent_ms, IDLE_ORDERS_MS - EARLY_MS, details)
        self.assertLessEqual(silent_ms, IDLE_ORDERS_MS + LATE_MS, details)
        print(f"RESULT demo_watch idle_ms={IDLE_ORDERS_MS} "
              f"silence_seen_by_caller_ms={silent_ms:.1f}", file=sys.stderr)
        # The message form.
        m = testlib.MESSAGE.match(details)
        self.assertIsNotNone(m, f"status message {details!r} does not match the grammar")
        self.assertEqual((m["source"], m["hop"], int(m["budget_ms"])),
                         ("idle", "orders", IDLE_ORDERS_MS), details)
        self.assertGreaterEqual(int(m["elapsed_ms"]), IDLE_ORDERS_MS, details)
        # The details: a google.rpc.Status with one hopbudget ErrorInfo.
        self.assertIn("grpc-status-details-bin", trailers, details)
        status, info = testlib.decode_details(PB, trailers["grpc-status-details-bin"])
        self.assertEqual(status.code, 4)
        self.assertEqual(status.message, details)
        self.assertEqual(info.reason, "STREAM_IDLE_BUDGET_EXHAUSTED")
        md = dict(info.metadata)
        self.assertEqual((md.get("source"), md.get("hop"), md.get("budget_ms")),
                         ("idle", "orders", str(IDLE_ORDERS_MS)))
        # The plain trailers.
        self.assertEqual(trailers.get("hopbudget-source"), "idle")
        self.assertEqual(trailers.get("hopbudget-hop"), "orders")
        self.assertEqual(trailers.get("hopbudget-budget-ms"), str(IDLE_ORDERS_MS))

    def test_the_baseline_chain_waits_for_the_client_deadline(self):
        place("baseline", "py-watch-base")
        set_silence("baseline", True)
        try:
            got, _, code, details, trailers, start, end = watch(
                "baseline", "py-watch-base", timeout=0.8)
        finally:
            set_silence("baseline", False)
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED, details)
        self.assertEqual(got, [])
        # Held until the caller's own 800 ms (no hop has an idle budget; the
        # baseline's 1 s timeouts come later).
        self.assertGreaterEqual((end - start) * 1000, 795, details)
        self.assertIsNone(trailers.get("hopbudget-source"), trailers)

    def test_chainctl_watch_prints_the_messages_and_the_idle_cut(self):
        place("hopbudget", "py-watch-cli")
        gateway = CHAINS["hopbudget"]["gateway"]
        ok = subprocess.run([ARGS.chainctl, "watch", "--gateway", gateway, "--key", "py-watch-cli",
                             "--budget", "500ms"], capture_output=True, text=True, timeout=30)
        # Ended by the --budget asked: a watch that lasted its budget.
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        lines = ok.stdout.splitlines()
        self.assertRegex(lines[0], r"^message 0 after [0-9.]+ms: COMMITTED order_id=\d+ "
                         r"key=py-watch-cli$")
        self.assertRegex(lines[-1], r"^attribution: source=client ")
        set_silence("hopbudget", True)
        try:
            cut = subprocess.run([ARGS.chainctl, "watch", "--gateway", gateway,
                                  "--key", "py-watch-cli", "--budget", "1500ms"],
                                 capture_output=True, text=True, timeout=30)
        finally:
            set_silence("hopbudget", False)
        self.assertEqual(cut.returncode, 1, cut.stdout + cut.stderr)
        lines = cut.stdout.splitlines()
        self.assertRegex(lines[0], r"^DEADLINE_EXCEEDED after [0-9.]+ms, 0 message\(s\), silent "
                         r"for [0-9.]+ms before the end: hopbudget/1: source=idle hop=orders "
                         r"budget_ms=300 ")
        self.assertRegex(lines[1], r"^attribution: source=idle hop=orders budget=300ms ")

    def test_chainctl_watch_without_a_key_is_refused(self):
        r = subprocess.run([ARGS.chainctl, "watch", "--gateway", CHAINS["hopbudget"]["gateway"]],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("chainctl watch: --key is required", r.stderr)


def main():
    global ARGS, TMP
    parser = argparse.ArgumentParser()
    for name in ("gateway", "orders", "ledger", "chainctl", "proto-dir"):
        parser.add_argument(f"--{name}", required=True)
    ARGS, rest = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="demo-watch-test-") as tmp:
        TMP = tmp
        os.makedirs(os.path.join(tmp, "py"))
        compile_demo_proto(ARGS.proto_dir, os.path.join(tmp, "py"))
        try:
            start_chain("hopbudget", idle=True)
            start_chain("baseline", idle=False)
            result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
        finally:
            for proc in reversed(PROCS):
                proc.terminate()
            for proc in PROCS:
                proc.wait(timeout=30)
        sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
