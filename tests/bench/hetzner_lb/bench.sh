#!/bin/sh
# Steady-state Hetzner API cost of mod_hetzner_lb's resync with N labelled
# balancers (default 1000): the daemon runs against prismlb-fake-hcloud
# (seeded with the balancers) and prismlb-fake-kube, with a short
# resync_interval; the script counts the requests per resync from the
# fake's request log and reports them per hour at resync_interval 300 s,
# the time one resync list takes, and the daemon's RSS.
# Usage: tests/bench/hetzner_lb/bench.sh BUILD_DIR [N]
set -eu
build=$(cd "${1:?usage: $0 BUILD_DIR [N]}" && pwd)
n=${2:-1000}
work=$(mktemp -d)
. "$(dirname "$0")/fakes.sh"

python3 - "$n" >"$work/seed.json" <<'PY'
import json, sys
n = int(sys.argv[1])
lbs = [{"name": "svc-%d.bench" % i, "load_balancer_type": "lb11", "location": "hel1",
        "labels": {"robotlb/service-uid": "uid-%d" % i},
        "services": [{"protocol": "tcp", "listen_port": 80, "destination_port": 30000 + i % 2000}]}
       for i in range(n)]
print(json.dumps({"tokens": ["tok"], "max_load_balancers": n + 10, "load_balancers": lbs}))
PY

# A resync every 5 s of up to 1,000 balancers (20 pages) needs 14,400 list
# requests an hour: a bucket of 360,000 leaves them within the default 10 %
# share, so the interval does not stretch (resync_budget_percent).
hz_args="--rate-bucket 360000 --rate-refill-per-s 100"
start_fakes
start_daemon info 'resync_interval = "5s";'
sleep 1
curl -s -X POST "$base/_admin/reset" >/dev/null
t0=$(date +%s.%N)
sleep 30
curl -s "$base/_admin/requests" >"$work/req.json"
t1=$(date +%s.%N)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$d_pid/status")
python3 - "$work/req.json" "$t0" "$t1" "$n" "$rss" <<'PY'
import json, sys
log = json.load(open(sys.argv[1]))
t0, t1, n, rss = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
reqs = log["requests"]
lists = [r for r in reqs if r["route"] == "GET /v1/load_balancers"]
firsts = [r for r in lists if r["path"].endswith("&page=1")]
others = [r for r in reqs if r["route"] != "GET /v1/load_balancers"]
resyncs = max(len(firsts), 1)
per = len(lists) / resyncs
# one resync: from its page 1 to the page before the next page 1
spans, counts, cur = [], [], None
for r in lists:
    if r["path"].endswith("&page=1"):
        if cur:
            spans.append(cur[1] - cur[0])
            counts.append(cur[2])
        cur = [r["t_ms"], r["t_ms"], 1]
    elif cur:
        cur[1] = r["t_ms"]
        cur[2] += 1
if counts:
    per = sum(counts) / len(counts)  # complete resyncs only
print("balancers (labelled)            %d" % n)
print("window                          %.1f s, %d resyncs" % (t1 - t0, len(firsts)))
print("requests per resync             %.1f (pages of 50)" % per)
print("other requests                  %d" % len(others))
print("429 answers                     %d" % sum(1 for r in reqs if r["status"] == 429))
print("requests/hour at resync 300 s   %.0f" % (per * 3600 / 300))
if spans: print("one resync list (page 1..last)  %.0f ms (fake answer latency included)" % (sum(spans) / len(spans)))
print("daemon RSS                      %d KiB" % rss)
PY
