#!/usr/bin/env python3
"""A stream under one deadline, seen from Python grpcio: Relay.Watch of tests/relay.

Starts a chain of hopbudget_relay_server processes on loopback (port 0 each):

    Python -> a (--stream-idle=600ms) -> b (--stream-idle=300ms) -> c (last hop)

c sends one message per step of its request; b and a relay the stream from
the hop below under their idle budgets (inner hops shorter, as budgets nest,
so the hop nearest the silence cuts first). The test opens a Watch from
Python, checks the messages arrive through every hop, then makes c go silent
(a step with `hang`) and checks what the caller gets: DEADLINE_EXCEEDED,
source idle, the hop that saw the silence, in every form hopbudget sends
(status message grammar, google.rpc.Status in grpc-status-details-bin, the
hopbudget-* trailers, the hopbudget-trace-bin trace), and that the cut came
at the idle budget after the last message, not at the call's deadline.

Run by ctest (tests/python/CMakeLists.txt):
  python3 stream_idle_test.py --server PATH/hopbudget_relay_server \
      --client PATH/hopbudget_relay_client --proto-dir DIR
"""
import argparse
import re
import subprocess
import sys
import tempfile
import time
import unittest

import hopbudget_testlib as testlib

grpc = testlib.require_grpc("stream_idle_test")

ARGS = None
PB = {}  # generated modules, by short name
FRONT = None  # "127.0.0.1:PORT" of hop a
HOPS = []  # (name, Popen), the last hop first

# The idle budgets the chain is started with (see the module docstring).
IDLE_A_MS, IDLE_B_MS = 600, 300
# The call's own deadline: far beyond every idle budget, so a cut near an
# idle budget cannot be the deadline's.
DEADLINE_S = 5.0

MESSAGE = testlib.MESSAGE  # the status message grammar, version 1

# How late an idle cut may come, measured by the caller from the last
# message it received to the status. The timer fires on time, then the cut
# travels up the chain and each hop answers; on a loaded 2-core machine that
# adds scheduling delays. A cut that waited for the deadline (5 s), or for
# an outer hop's budget (a's 600 ms where b's 300 ms should fire), is far
# outside. Early: the idle budget counts from the last message at b, which
# the caller sees a little later, so a little less than the budget passes at
# the caller; never much less.
EARLY_MS, LATE_MS = 20, 250


def start_hop(server, name, *flags):
    """Starts one hop and returns its port (it prints "listening on PORT" first)."""
    proc = subprocess.Popen([server, "--host=127.0.0.1", "--port=0", f"--hop={name}", *flags],
                            stdout=subprocess.PIPE, text=True)
    HOPS.append((name, proc))
    line = proc.stdout.readline()
    m = re.match(r"^listening on (\d+)$", line.strip())
    if m is None:
        sys.exit(f"stream_idle_test: hop {name} printed {line!r}, not 'listening on PORT'")
    return int(m.group(1))


def step(**fields):
    return PB["relay"].Step(**fields)


def watch(steps, timeout=DEADLINE_S):
    """Opens a Watch through the chain and reads it to its end.

    Returns (messages, arrival times, code, message, trailers, the time the
    status arrived), times from time.monotonic()."""
    with grpc.insecure_channel(FRONT) as channel:
        stub = PB["relay_grpc"].RelayStub(channel)
        stream = stub.Watch(PB["relay"].RelayRequest(payload="p", steps=steps), timeout=timeout)
        messages, times = [], []
        try:
            for m in stream:
                times.append(time.monotonic())
                messages.append(m)
            return messages, times, grpc.StatusCode.OK, "", {}, time.monotonic()
        except grpc.RpcError as e:
            ended = time.monotonic()
            return (messages, times, e.code(), e.details() or "",
                    dict(e.trailing_metadata() or ()), ended)


def relays(a=None, b=None):
    """The steps of the two relaying hops (a, b); each may name an idle budget."""
    return [step(relay_watch_idle_ms=a or 0), step(relay_watch_idle_ms=b or 0)]


class StreamIdleTest(unittest.TestCase):

    def assert_idle_cut(self, result, hop, idle_ms, messages):
        """The stream carried `messages` messages, then `hop` cut it at its
        `idle_ms` idle budget, in every form."""
        got, times, code, message, trailers, ended = result
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED, message)
        self.assertEqual([m.payload for m in got], [str(i) for i in range(messages)])
        # At the idle budget after the last message, not at the deadline.
        silent_ms = (ended - times[-1]) * 1000
        self.assertGreaterEqual(silent_ms, idle_ms - EARLY_MS, message)
        self.assertLessEqual(silent_ms, idle_ms + LATE_MS, message)
        print(f"RESULT stream_idle hop={hop} idle_ms={idle_ms} "
              f"silence_seen_by_caller_ms={silent_ms:.1f}", file=sys.stderr)
        # The message form.
        m = MESSAGE.match(message)
        self.assertIsNotNone(m, f"status message {message!r} does not match the grammar")
        self.assertEqual(m["source"], "idle", message)
        self.assertEqual(m["hop"], hop, message)
        self.assertEqual(int(m["budget_ms"]), idle_ms, message)
        # elapsed: the silence the cutting hop measured, from its last stream
        # activity to the cut.
        self.assertGreaterEqual(int(m["elapsed_ms"]), idle_ms, message)
        self.assertLessEqual(int(m["elapsed_ms"]), idle_ms + LATE_MS, message)
        # The details: a google.rpc.Status with one hopbudget ErrorInfo.
        self.assertIn("grpc-status-details-bin", trailers, message)
        status, info = testlib.decode_details(PB, trailers["grpc-status-details-bin"])
        self.assertEqual(status.code, 4)
        self.assertEqual(status.message, message)
        self.assertEqual(info.domain, "hopbudget")
        self.assertEqual(info.reason, "STREAM_IDLE_BUDGET_EXHAUSTED")
        md = dict(info.metadata)
        self.assertEqual(md.get("source"), "idle")
        self.assertEqual(md.get("hop"), hop)
        self.assertEqual(md.get("budget_ms"), m["budget_ms"])
        self.assertEqual(md.get("elapsed_ms"), m["elapsed_ms"])
        # The plain trailers.
        self.assertEqual(trailers.get("hopbudget-source"), "idle")
        self.assertEqual(trailers.get("hopbudget-hop"), hop)
        self.assertEqual(trailers.get("hopbudget-budget-ms"), m["budget_ms"])
        self.assertEqual(trailers.get("hopbudget-elapsed-ms"), m["elapsed_ms"])
        # The trace: a's entry first, with the budget that fired.
        self.assertIn("hopbudget-trace-bin", trailers)
        trace = PB["trace"].BudgetTrace()
        trace.ParseFromString(trailers["hopbudget-trace-bin"])
        self.assertGreaterEqual(len(trace.entries), 1)
        self.assertEqual(trace.entries[0].hop, "a")
        self.assertEqual(trace.entries[0].code, 4)
        self.assertEqual(trace.entries[0].source, "idle")

    def test_messages_arrive_through_every_hop(self):
        got, times, code, message, _, _ = watch(relays() + [step(work_ms=10)] * 4)
        self.assertEqual(code, grpc.StatusCode.OK, message)
        self.assertEqual([m.payload for m in got], ["0", "1", "2", "3"])
        for m in got:
            self.assertEqual([h.hop for h in m.hops], ["a", "b", "c"])
            # Each hop saw a budget below the caller's 5 s deadline.
            for h in m.hops:
                self.assertGreater(h.budget_on_arrival_us, 0)
                self.assertLessEqual(h.budget_on_arrival_us, DEADLINE_S * 1e6 + 50_000)

    def test_a_stream_longer_than_its_idle_budgets_is_not_cut_while_it_talks(self):
        # 6 messages 150 ms apart: 900 ms in all, beyond both idle budgets,
        # but never silent for 300 ms.
        got, _, code, message, _, _ = watch(relays() + [step(work_ms=150)] * 6)
        self.assertEqual(code, grpc.StatusCode.OK, message)
        self.assertEqual(len(got), 6)

    def test_silence_at_the_last_hop_is_cut_at_b_idle_budget(self):
        # Two messages, then c goes silent: b, which reads c, sees the silence
        # and cuts at its 300 ms; a relays b's attribution unchanged.
        result = watch(relays() + [step(work_ms=10), step(work_ms=10, hang=True)])
        self.assert_idle_cut(result, "b", IDLE_B_MS, messages=2)

    def test_silence_before_the_first_message_is_cut_too(self):
        # The idle budget counts from the stream's start.
        result = watch(relays() + [step(work_ms=2000)])
        got, _, code, message, _, _ = result
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED, message)
        self.assertEqual(got, [])
        m = MESSAGE.match(message)
        self.assertIsNotNone(m, message)
        self.assertEqual((m["source"], m["hop"], m["budget_ms"]), ("idle", "b", str(IDLE_B_MS)))

    def test_a_request_names_a_hop_idle_budget(self):
        # steps[1].relay_watch_idle_ms overrides b's --stream-idle.
        result = watch(relays(b=150) + [step(), step(hang=True)])
        self.assert_idle_cut(result, "b", 150, messages=2)

    def test_the_hop_with_the_shorter_idle_budget_sees_the_silence_first(self):
        # a allows only 100 ms of silence, b its 300 ms: a cuts first.
        result = watch(relays(a=100) + [step(), step(hang=True)])
        self.assert_idle_cut(result, "a", 100, messages=2)

    def test_the_deadline_still_bounds_a_stream_that_keeps_talking(self):
        # Never silent, but longer than the caller's 1 s: the caller's own
        # deadline ends it (no idle source).
        got, _, code, message, _, _ = watch(relays() + [step(work_ms=100)] * 30, timeout=1.0)
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED, message)
        self.assertGreater(len(got), 3)
        m = MESSAGE.match(message)
        self.assertTrue(m is None or m["source"] != "idle", message)

    def test_a_negative_idle_budget_in_the_request_is_refused(self):
        got, _, code, message, _, _ = watch([step(relay_watch_idle_ms=-5), step(), step()])
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT, message)
        self.assertIn("steps[0].relay_watch_idle_ms: -5 is negative", message)
        self.assertEqual(got, [])


class CommandLineTest(unittest.TestCase):
    """The relay binaries' command lines: tests/relay/README.md's Watch chain, and bad flags."""

    def run_binary(self, *argv):
        return subprocess.run(argv, capture_output=True, text=True, timeout=30)

    def test_the_readme_watch_command_prints_the_messages_and_the_idle_cut(self):
        r = self.run_binary(ARGS.client, f"--target={FRONT}", "--budget=5s", "--watch",
                            "--work=0,0,20ms", "--messages=5", "--silent-after=3")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual([l.split(" after ")[0] for l in lines[:3]],
                         ["message 0", "message 1", "message 2"], r.stdout)
        for l in lines[:3]:
            self.assertTrue(l.endswith(" via a,b,c"), l)
        self.assertRegex(lines[3], r"^error after .*: DEADLINE_EXCEEDED: hopbudget/1: "
                         r"source=idle hop=b budget_ms=300 ")
        self.assertRegex(lines[4], r"^attribution: source=idle hop=b budget=300ms ")

    def test_a_negative_stream_idle_flag_is_refused(self):
        r = self.run_binary(ARGS.server, "--port=0", "--stream-idle=-5ms")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--stream-idle=-5ms: must be >= 0", r.stderr)

    def test_silent_after_beyond_the_messages_is_refused(self):
        r = self.run_binary(ARGS.client, "--watch", "--messages=5", "--silent-after=7")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--silent-after=7: must be in [0, 5]", r.stderr)


def main():
    global ARGS, FRONT
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True, help="hopbudget_relay_server")
    parser.add_argument("--client", required=True, help="hopbudget_relay_client")
    parser.add_argument("--proto-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    args = ARGS
    with tempfile.TemporaryDirectory() as out:
        PB.update(testlib.compile_protos("stream_idle_test", args.proto_dir, out))
        try:
            port_c = start_hop(args.server, "c")
            port_b = start_hop(args.server, "b", f"--next=127.0.0.1:{port_c}",
                               f"--stream-idle={IDLE_B_MS}ms")
            port_a = start_hop(args.server, "a", f"--next=127.0.0.1:{port_b}",
                               f"--stream-idle={IDLE_A_MS}ms")
            FRONT = f"127.0.0.1:{port_a}"
            result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
        finally:
            for name, proc in reversed(HOPS):
                proc.terminate()
            for name, proc in HOPS:
                proc.wait(timeout=30)
        sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
