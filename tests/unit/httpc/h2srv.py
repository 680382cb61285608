#!/usr/bin/python3
"""h2srv: a TLS server on 127.0.0.1 (ephemeral port) for the HTTP client's
HTTP/2 tests, on the hyper-h2 protocol library.

    h2srv.py MODE CERT KEY [ROTATE]

MODE h2: ALPN chooses "h2" and every request gets 200 with the body
"h2 <method> <path>" over HTTP/2.
MODE h1-h2-line: ALPN chooses "http/1.1" and every request gets the bytes
"HTTP/2 200 \\r\\n...": the status line libcurl writes for an HTTP/2 answer,
sent by an HTTP/1.1 peer, where it is an invalid version.

Prints "port N" once listening, then "conn N" as the Nth TLS connection is
established (N from 1) and "req N METHOD PATH" for each request it carries;
serves until SIGTERM. While the file ROTATE exists, holding "CERT KEY" (two
paths), new connections are served with that certificate instead (a
rotation); established ones keep theirs.
"""
import signal
import socket
import ssl
import sys
import threading

import h2.config
import h2.connection
import h2.events
import h2.exceptions


out_lock = threading.Lock()


def say(line):
    with out_lock:
        print(line, flush=True)


def serve_h2(conn, n):
    h2c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    h2c.initiate_connection()
    conn.sendall(h2c.data_to_send())
    heads = {}
    while True:
        data = conn.recv(65536)
        if not data:
            return
        for ev in h2c.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                heads[ev.stream_id] = dict(ev.headers)
            elif isinstance(ev, h2.events.StreamEnded):
                h = heads.pop(ev.stream_id, {})
                say("req %d %s %s" % (n, h.get(b":method", b"-").decode(),
                                      h.get(b":path", b"-").decode()))
                body = b"h2 " + h.get(b":method", b"-") + b" " + h.get(b":path", b"-")
                h2c.send_headers(ev.stream_id, [(":status", "200"),
                                                ("content-length", str(len(body))),
                                                ("content-type", "text/plain")])
                h2c.send_data(ev.stream_id, body, end_stream=True)
        conn.sendall(h2c.data_to_send())


def serve_h1_h2_line(conn, n):
    got = b""
    while b"\r\n\r\n" not in got:
        data = conn.recv(65536)
        if not data:
            return
        got += data
    conn.sendall(b"HTTP/2 200 \r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")


def main():
    mode, cert, key = sys.argv[1:4]
    rotate = sys.argv[4] if len(sys.argv) > 4 else None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["h2"] if mode == "h2" else ["http/1.1"])
    serve = serve_h2 if mode == "h2" else serve_h1_h2_line
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("port %d" % lsock.getsockname()[1], flush=True)

    def one(raw, n):
        try:
            with ctx.wrap_socket(raw, server_side=True) as conn:
                say("conn %d" % n)
                serve(conn, n)
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
            pass

    n = 0
    while True:
        raw, _ = lsock.accept()
        if rotate:
            try:
                with open(rotate) as f:
                    ctx.load_cert_chain(*f.read().split())
            except FileNotFoundError:
                pass
        n += 1
        threading.Thread(target=one, args=(raw, n), daemon=True).start()


if __name__ == "__main__":
    main()
