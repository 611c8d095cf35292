#!/usr/bin/python3
# Copyright hopbudget authors.
#
# Every query of examples/monitoring/grafana-dashboard.json, run against a
# real Prometheus (Debian package prometheus) scraping a running chain
# (monitoring_chain: gateway -> orders -> ledger with their exporters, under
# load), must answer with data; the recording rules are loaded and must
# answer too; the budget p50 Prometheus computes must be within 5 % of the
# 800 ms the load sends. Prometheus listens on a free loopback port with a
# temporary configuration and storage directory; both processes are ended
# by their own ids.
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

RATE_WINDOW = "20s"  # $__rate_interval for a 1 s scrape interval
BUDGET_SENT = 0.8


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(base, expr):
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"query failed: {expr}: {body}")
    return body["data"]["result"]


def with_numbers(result):
    """The series of `result` whose value is a number (histogram_quantile of
    an empty rate gives NaN: a series, but no data)."""
    return [r for r in result if r["value"][1] not in ("NaN", "+Inf", "-Inf")]


def wait_for(what, check, timeout):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            result = check()
            if result:
                return result
        except (OSError, RuntimeError) as e:  # not up yet
            last = e
        time.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what} (last error: {last})")


def start_prometheus(binary, config, data, log_path, tries=5):
    """Starts Prometheus on a free loopback port; returns (process, base URL)
    once it is ready. The port is free when chosen but can be taken (by
    another test's connection) before Prometheus binds it: Prometheus then
    exits, and it is started again on another port."""
    for _ in range(tries):
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with open(log_path, "w") as log:
            process = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={data}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=log, stderr=subprocess.STDOUT)

        def ready():
            if process.poll() is not None:
                return "exited"
            return urllib.request.urlopen(base + "/-/ready", timeout=5).status == 200

        try:
            if wait_for("Prometheus ready", ready, 60) is True:
                return process, base
        except TimeoutError as e:
            process.kill()
            process.wait()
            with open(log_path) as log:
                raise RuntimeError(f"{e}; Prometheus's log:\n{log.read()[-2000:]}") from e
        with open(log_path) as log:
            text = log.read()
        if "address already in use" not in text:
            raise RuntimeError(f"Prometheus exited ({process.returncode}):\n{text[-2000:]}")
        print(f"port {port} was taken before Prometheus bound it; trying another")
    raise RuntimeError(f"Prometheus found no free port in {tries} tries")


def dashboard_queries(path):
    with open(path) as f:
        dashboard = json.load(f)
    out = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", RATE_WINDOW).replace("$job", ".+")
            out.append((panel["title"], target["refId"], expr))
    return out


def recorded_names(path):
    names = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("- record:"):
                names.append(line.split(":", 1)[1].strip())
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--chain", required=True)
    ap.add_argument("--dashboard", required=True)
    ap.add_argument("--rules", required=True)
    args = ap.parse_args()

    queries = dashboard_queries(args.dashboard)
    assert queries, "the dashboard has no queries"
    chain = subprocess.Popen([args.chain], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    prometheus = None
    with tempfile.TemporaryDirectory(prefix="hopbudget-dashboard-test-") as tmp:
        try:
            ports = json.loads(chain.stdout.readline())
            config = os.path.join(tmp, "prometheus.yml")
            with open(config, "w") as f:
                f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n")
                f.write(f"rule_files:\n  - {args.rules}\n")
                f.write("scrape_configs:\n")
                for job, port in ports.items():
                    f.write(f"  - job_name: {job}\n    static_configs:\n"
                            f"      - targets: ['127.0.0.1:{port}']\n")
            log_path = os.path.join(tmp, "prometheus.log")
            prometheus, base = start_prometheus(args.prometheus, config,
                                                os.path.join(tmp, "data"), log_path)
            wait_for("every target up",
                     lambda: len([r for r in query(base, "up == 1")]) == len(ports), 60)

            failures = []
            # Each query must answer with data: wait (bounded) until it does,
            # since rates need two scrapes and rules an evaluation.
            for title, ref, expr in queries:
                try:
                    result = wait_for(f"{title} {ref}",
                                      lambda: with_numbers(query(base, expr)), 60)
                    print(f"ok   {title} [{ref}]: {len(result)} series")
                except TimeoutError:
                    failures.append(f"no data: {title} [{ref}]: {expr}")
            for name in recorded_names(args.rules):
                try:
                    result = wait_for(name, lambda: with_numbers(query(base, name)), 60)
                    print(f"ok   rule {name}: {len(result)} series")
                except TimeoutError:
                    failures.append(f"no data: recording rule {name}")

            # Through wait_for like every query above: a transient error of
            # the HTTP query is retried (the value is checked once).
            p50_expr = ("histogram_quantile(0.5, sum by (le) (rate("
                        "hopbudget_budget_at_arrival_seconds_bucket"
                        f"{{job=\"gateway\", role=\"application\"}}[{RATE_WINDOW}])))")
            try:
                p50 = wait_for("budget p50", lambda: with_numbers(query(base, p50_expr)), 60)
            except TimeoutError as e:
                p50 = []
                failures.append(f"no data: {e}")
            value = float(p50[0]["value"][1]) if p50 else float("nan")
            print(f"budget p50 at gateway: {value:.4f} s (sent {BUDGET_SENT} s)")
            if not abs(value - BUDGET_SENT) <= 0.05 * BUDGET_SENT:
                failures.append(f"budget p50 {value} is not within 5 % of {BUDGET_SENT}")
            if failures:
                print("\n".join(failures), file=sys.stderr)
                return 1
            return 0
        finally:
            if prometheus is not None:
                prometheus.terminate()
                try:
                    prometheus.wait(timeout=30)
                except subprocess.TimeoutExpired:  # its shutdown is not under test
                    prometheus.kill()
                    prometheus.wait()
            chain.stdin.close()
            chain.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
