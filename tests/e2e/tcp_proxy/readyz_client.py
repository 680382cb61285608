#!/usr/bin/env python3
"""Hold one HTTPS connection through the proxy: GET /id, print "id X",
then wait (bounded by TIMEOUT seconds) until the connection is closed and
print "closed MS" with MS the CLOCK_MONOTONIC time of the close in ms (the
clock the C tests read), or "still open". Usage: readyz_client.py PORT CA_FILE TIMEOUT"""
import re
import socket
import ssl
import sys
import time


def main():
    port, ca, timeout = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    ctx = ssl.create_default_context(cafile=ca)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname="kubernetes.default.svc")
    s.sendall(b"GET /id HTTP/1.1\r\nHost: kubernetes.default.svc\r\n\r\n")
    data = b""
    while True:
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            m = re.search(rb"(?i)content-length:\s*(\d+)", head)
            if m and len(body) >= int(m.group(1)):
                break
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    print("id " + data.partition(b"\r\n\r\n")[2].decode().strip(), flush=True)
    s.settimeout(timeout)
    try:
        while s.recv(4096):
            pass
        print("closed %.0f" % (time.monotonic() * 1000), flush=True)
    except socket.timeout:
        print("still open", flush=True)
    except (ssl.SSLError, OSError):
        print("closed %.0f" % (time.monotonic() * 1000), flush=True)


if __name__ == "__main__":
    main()
