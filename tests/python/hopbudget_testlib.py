"""What the Python tests in tests/python share: grpcio, the hopbudget protos
compiled at test time from proto/ (nothing generated is kept in the tree),
the status message grammar and the google.rpc.Status decoder.

A test imports it by name: Python puts the directory of the script it runs
first on sys.path, so `python3 tests/python/x_test.py` finds it from any
working directory (ctest runs the tests by absolute path).

    import hopbudget_testlib as testlib
    grpc = testlib.require_grpc("x_test")
    ...
    with tempfile.TemporaryDirectory() as out:
        PB.update(testlib.compile_protos("x_test", args.proto_dir, out))
"""
import importlib
import os
import re
import sys

# The status message grammar, version 1 (interceptors/core/include/hopbudget/advanced/attribution.h).
MESSAGE = re.compile(
    r"^hopbudget/1: source=(?P<source>[a-z-]+)"
    r"(?: hop=(?P<hop>[A-Za-z0-9._-]{1,64}))?"
    r" budget_ms=(?P<budget_ms>[0-9]{1,13}) elapsed_ms=(?P<elapsed_ms>[0-9]{1,13})(?: |$)")

# The protos the tests decode answers with, and the short names they get.
PROTOS = {
    "status": ("hopbudget/status.proto", "hopbudget.status_pb2"),
    "trace": ("hopbudget/trace.proto", "hopbudget.trace_pb2"),
    "relay": ("echo/relay.proto", "echo.relay_pb2"),
}


def require_grpc(program):
    """The grpc module; exits with a clear message (never a silent skip) without it."""
    try:
        import grpc
        from grpc_tools import protoc  # noqa: F401 (compile_protos needs it)
    except ImportError as e:
        sys.exit(f"{program}: {e}: install Debian's python3-grpcio and "
                 "python3-grpc-tools (./scripts/test.sh does) and run with /usr/bin/python3")
    return grpc


def compile_protos(program, proto_dir, out_dir):
    """Compiles the PROTOS from `proto_dir` into `out_dir`, puts `out_dir` on
    sys.path and returns the generated modules by short name ("status",
    "trace", "relay", "relay_grpc"). Exits naming the files when protoc fails."""
    import grpc_tools
    from grpc_tools import protoc
    includes = [proto_dir, os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"),
                "/usr/include"]
    files = [f for f, _ in PROTOS.values()]
    args = ["protoc"] + [f"-I{i}" for i in includes if os.path.isdir(i)]
    args += [f"--python_out={out_dir}", f"--grpc_python_out={out_dir}"]
    args += [os.path.join(proto_dir, f) for f in files]
    if protoc.main(args) != 0:
        sys.exit(f"{program}: protoc failed on " + " ".join(files))
    sys.path.insert(0, out_dir)
    pb = {name: importlib.import_module(module) for name, (_, module) in PROTOS.items()}
    pb["relay_grpc"] = importlib.import_module("echo.relay_pb2_grpc")
    return pb


def decode_details(pb, raw):
    """(google.rpc.Status, ErrorInfo) from grpc-status-details-bin, with the
    modules `pb` compile_protos returned; AssertionError unless there is
    exactly one ErrorInfo."""
    status = pb["status"].Status()
    status.ParseFromString(raw)
    infos = [d for d in status.details if d.type_url == "type.googleapis.com/google.rpc.ErrorInfo"]
    if len(infos) != 1:
        raise AssertionError(f"expected one ErrorInfo, got {status}")
    info = pb["status"].ErrorInfo()
    info.ParseFromString(infos[0].value)
    return status, info
