#!/usr/bin/env python3
"""Open N idle TCP connections to 127.0.0.1:PORT and hold them.

Usage: idle_conns.py PORT N HOLD_SECONDS

Raises RLIMIT_NOFILE as far as the hard limit allows, connects in batches
(non-blocking, bounded), prints "ready <connected>" on stdout once every
connection is established, then holds them, sending nothing, until
HOLD_SECONDS pass or stdin closes. Exit status 0, or 1 when fewer than N
connected within the time allowed.
"""
import resource
import select
import socket
import sys
import time


def main():
    port, n, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, n + 256) if hard != resource.RLIM_INFINITY else n + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    socks = []
    deadline = time.monotonic() + 60
    pending = []
    while (len(socks) < n or pending) and time.monotonic() < deadline:
        while len(socks) + len(pending) < n and len(pending) < 512:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            err = s.connect_ex(("127.0.0.1", port))
            if err not in (0, 115):  # EINPROGRESS
                s.close()
                time.sleep(0.01)
                break
            pending.append(s)
        if not pending:
            continue
        poller = select.poll()
        byfd = {}
        for s in pending:
            poller.register(s.fileno(), select.POLLOUT)
            byfd[s.fileno()] = s
        ready = [byfd[fd] for fd, _ in poller.poll(1000)]
        for s in ready:
            pending.remove(s)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                socks.append(s)
            else:
                s.close()
    print("ready %d" % len(socks), flush=True)
    end = time.monotonic() + hold
    while time.monotonic() < end:
        poller = select.poll()
        poller.register(sys.stdin.fileno(), select.POLLIN)
        if poller.poll(int(max(0.0, min(1.0, end - time.monotonic())) * 1000)):
            if not sys.stdin.read(1):
                break
    for s in socks:
        s.close()
    return 0 if len(socks) == n else 1


if __name__ == "__main__":
    sys.exit(main())
