#!/usr/bin/python3
# Copyright hopbudget authors.
#
# h2_peer.py: an HTTP/2 (h2c) server that speaks just enough gRPC to answer
# unary calls, and does at the frame level what a gRPC server cannot be made
# to do on demand: refuse a stream (RST_STREAM REFUSED_STREAM, "not
# processed", RFC 9113 8.7), which a gRPC client may re-send on its own (a
# transparent retry). Built on Debian's python3-h2.
#
#   h2_peer.py [--refuse-first=N] [--goaway] [--status=CODE]
#
# The first N streams are refused: with RST_STREAM REFUSED_STREAM, or with
# --goaway by a GOAWAY that says the stream was not processed (its last
# stream id is lower), after which that connection is closed. Every later
# stream is answered with one empty message and grpc-status CODE (default 0,
# OK), or trailers only when CODE is not 0. Prints "listening on PORT" on
# stdout once it accepts connections, and one line per stream on stderr,
# before its answer is sent:
#   stream <n> <path> grpc=<grpc-previous-rpc-attempts> hopbudget=<hopbudget-previous-attempts> refused|goaway|answered
# where n counts streams across connections from 1 and a header not sent
# is "-".
import argparse
import socket
import sys
import threading

import h2.config
import h2.connection
import h2.errors
import h2.events

_lock = threading.Lock()
_streams = 0


def _log(line):
    with _lock:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _serve(sock, refuse_first, status, goaway):
    global _streams
    conn = h2.connection.H2Connection(
        config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    headers_of = {}
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    headers_of[event.stream_id] = dict(event.headers)
                elif isinstance(event, h2.events.StreamEnded):
                    headers = headers_of.pop(event.stream_id, {})
                    with _lock:
                        _streams += 1
                        n = _streams
                    previous = "grpc={} hopbudget={}".format(
                        headers.get("grpc-previous-rpc-attempts", "-"),
                        headers.get("hopbudget-previous-attempts", "-"))
                    path = headers.get(":path", "?")
                    if n <= refuse_first and goaway:
                        # Client streams are odd: the one before this one.
                        conn.close_connection(h2.errors.ErrorCodes.NO_ERROR,
                                              last_stream_id=max(event.stream_id - 2, 0))
                        _log(f"stream {n} {path} {previous} goaway")
                        sock.sendall(conn.data_to_send())
                        return
                    if n <= refuse_first:
                        conn.reset_stream(event.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
                        _log(f"stream {n} {path} {previous} refused")
                    else:
                        _answer(conn, event.stream_id, status)
                        _log(f"stream {n} {path} {previous} answered")
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
    except (ConnectionError, OSError):
        return
    finally:
        sock.close()


def _answer(conn, stream_id, status):
    if status == 0:
        conn.send_headers(stream_id, [(":status", "200"), ("content-type", "application/grpc")])
        conn.send_data(stream_id, b"\x00\x00\x00\x00\x00")  # one empty message
        conn.send_headers(stream_id, [("grpc-status", "0")], end_stream=True)
    else:
        conn.send_headers(stream_id, [(":status", "200"), ("content-type", "application/grpc"),
                                      ("grpc-status", str(status)),
                                      ("grpc-message", "h2_peer")], end_stream=True)


def main():
    parser = argparse.ArgumentParser(description="HTTP/2 peer that refuses streams")
    parser.add_argument("--refuse-first", type=int, default=0)
    parser.add_argument("--status", type=int, default=0)
    parser.add_argument("--goaway", action="store_true")
    args = parser.parse_args()
    if args.refuse_first < 0 or not 0 <= args.status <= 16:
        parser.error("--refuse-first >= 0, --status 0..16")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print(f"listening on {listener.getsockname()[1]}", flush=True)
    while True:
        sock, _ = listener.accept()
        threading.Thread(target=_serve, args=(sock, args.refuse_first, args.status, args.goaway),
                         daemon=True).start()


if __name__ == "__main__":
    main()
