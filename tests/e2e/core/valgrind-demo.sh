#!/bin/sh
# Runs inside a private network namespace (so conf/demo.conf's fixed ports
# are free): the daemon under valgrind with conf/demo.conf, one scrape,
# SIGTERM, and valgrind's verdict. Prints "exit=N" last.
set -u
daemon=$1 conf=$2
ip link set lo up || exit 97
valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite,indirect,possible \
  --error-exitcode=99 "$daemon" --config "$conf" &
pid=$!
i=0
until curl -fsS -o /dev/null http://127.0.0.1:7446/healthz 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 600 ] || ! kill -0 $pid 2>/dev/null; then
    kill -KILL $pid 2>/dev/null
    echo "daemon did not come up"
    echo "exit=98"
    exit 0
  fi
  sleep 0.1
done
curl -fsS http://127.0.0.1:7446/metrics | grep -c '^prismlb_' | sed 's/^/prismlb metric lines: /'
curl -fsS 'http://127.0.0.1:7446/readyz?verbose' >/dev/null
kill -TERM $pid
wait $pid
echo "exit=$?"
