#!/usr/bin/env python3
"""A shared TLS endpoint that picks its backend by the ClientHello's server
name, as an ingress with SSL passthrough does, for the SNI test.

Usage: sni_router.py PORT_FILE CERT KEY NAME=ID...

Serves HTTPS on 127.0.0.1 (ephemeral port, written to PORT_FILE) with CERT
and KEY. A handshake whose server name is one of the NAMEs is served by
backend ID: every GET answers 200 with the JSON {"backend": ID, "sni":
NAME}. Any other server name, or none, is refused during the handshake
(unrecognized_name), as a router with no default backend does. One line
"sni NAME" (or "sni -") per handshake on stdout.
"""
import http.server
import json
import os
import ssl
import sys


def main():
    port_file, cert, key = sys.argv[1:4]
    routes = dict(a.split("=", 1) for a in sys.argv[4:])

    def pick(sock, name, ctx):
        print("sni %s" % (name or "-"), flush=True)
        if name not in routes:
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
        sock.backend = (routes[name], name)
        return None

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.sni_callback = pick

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def do_GET(self):
            ident, name = getattr(self.request, "backend", ("-", "-"))
            body = json.dumps({"backend": ident, "sni": name}).encode() + b"\n"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class S(http.server.ThreadingHTTPServer):
        daemon_threads = True

        def get_request(self):
            sock, addr = self.socket.accept()
            # The handshake runs in the request's thread, on its first read.
            return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

        def handle_error(self, request, client_address):
            pass  # a refused server name ends its handshake with an alert

    srv = S(("127.0.0.1", 0), H)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
