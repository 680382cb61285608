#!/usr/bin/env python3
"""An HTTPS stand-in for an API server's /readyz, for the readyz probe tests.

Usage: readyz_server.py PORT_FILE DIR ID [--require-cert] [--token-file F]

Serves HTTPS on 127.0.0.1 (ephemeral port, written to PORT_FILE) with
DIR/server.crt and DIR/server.key. GET /readyz answers 500 while the file
DIR/ID.unready exists; with --require-cert the TLS handshake requires a
client certificate signed by DIR/ca.crt; with --token-file it requires
"Authorization: Bearer <contents of F>" (F read on every request, so tests
rotate it) and answers 401 otherwise. Any other path answers 200 with body
"ID\\n" on a kept-alive connection. One line per /readyz request on stdout.
While the file DIR/ID.cert exists, holding "CERT KEY" (two paths), new
connections are served with that certificate instead (a rotation); kept-alive
connections keep the one they were established with.
"""
import http.server
import os
import ssl
import sys
import threading


def main():
    port_file, d, ident = sys.argv[1], sys.argv[2], sys.argv[3]
    args = sys.argv[4:]
    require_cert = "--require-cert" in args
    token_file = args[args.index("--token-file") + 1] if "--token-file" in args else None

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def reply(self, code, body):
            b = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)

        def do_GET(self):
            if self.path.startswith("/readyz"):
                if token_file is not None:
                    try:
                        with open(token_file) as f:
                            want = "Bearer " + f.read().strip()
                    except OSError:
                        want = None
                    got = self.headers.get("Authorization")
                    if want is None or got != want:
                        print("readyz 401", flush=True)
                        return self.reply(401, "unauthorized\n")
                if os.path.exists(os.path.join(d, ident + ".unready")):
                    print("readyz 500", flush=True)
                    return self.reply(500, "etcd failed\n")
                print("readyz 200", flush=True)
                return self.reply(200, "ok")
            return self.reply(200, ident + "\n")

    class S(http.server.ThreadingHTTPServer):
        daemon_threads = True

        def get_request(self):
            sock, addr = self.socket.accept()
            rotated = os.path.join(d, ident + ".cert")
            if os.path.exists(rotated):
                with open(rotated) as f:
                    crt, key = f.read().split()
                ctx.load_cert_chain(crt, key)
            return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(d, "server.crt"), os.path.join(d, "server.key"))
    if require_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(os.path.join(d, "ca.crt"))
    srv = S(("127.0.0.1", 0), H)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
