#!/bin/sh
# Requests per second of the fake Hetzner Cloud API (tests/fakes/hetzner).
# Not part of `meson test`. Needs wrk (tests/setup.sh bench installs it).
#
# Usage: tests/bench/hetzner/bench.sh [BUILD_DIR] [SECONDS]
#   BUILD_DIR defaults to ./build, SECONDS (per scenario) to 5.
# Prints one line per scenario: "<scenario>: <N> requests/s (fake at P% of
# one core; <C> per CPU-second)", then the lowest figure as
# "min: <N> requests/s". wrk shares the machine with the fake, so on a busy
# machine the CPU-second figure says more about the fake than requests/s.
set -eu
build=${1:-build}
secs=${2:-5}
fake="$build/tests/fakes/hetzner/prismlb-fake-hcloud"
[ -x "$fake" ] || { echo "no $fake; build first" >&2; exit 2; }
command -v wrk >/dev/null || { echo "wrk not installed (tests/setup.sh bench)" >&2; exit 2; }

dir=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

# 40 balancers, half of them labelled, each with targets and a service.
{
  echo '{"tokens":["bench"],"networks":[{"id":1,"name":"k8s","ip_range":"10.0.0.0/16",'
  echo '"subnets":[{"type":"cloud","ip_range":"10.0.0.0/24"},'
  echo '{"type":"vswitch","ip_range":"10.0.1.0/24","vswitch_id":1}]}],"load_balancers":['
  i=1
  while [ $i -le 40 ]; do
    [ $i -gt 1 ] && echo ','
    labels='{}'
    [ $((i % 2)) -eq 0 ] && labels="{\"robotlb/service-uid\":\"uid-$i\"}"
    printf '{"name":"svc-%d.default","load_balancer_type":"lb11","location":"hel1",' "$i"
    printf '"labels":%s,"network":1,"targets":[' "$labels"
    printf '{"type":"ip","ip":{"ip":"10.0.1.%d"}},{"type":"ip","ip":{"ip":"10.0.1.%d"}}],' \
      $((i + 10)) $((i + 100))
    printf '"services":[{"protocol":"tcp","listen_port":80,"destination_port":30080}]}'
    i=$((i + 1))
  done
  echo ']}'
} > "$dir/seed.json"

"$fake" --listen 127.0.0.1:0 --port-file "$dir/port" --seed "$dir/seed.json" \
  --rate-bucket 1000000000 --rate-refill-per-s 1000000 >"$dir/fake.log" 2>&1 &
pid=$!
n=0
while [ ! -s "$dir/port" ]; do
  n=$((n + 1)); [ $n -gt 100 ] && { cat "$dir/fake.log" >&2; exit 1; }
  sleep 0.05
done
url=$(cat "$dir/port")

hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
min=
run() { # $1 name, $2 path
  t0=$(ticks)
  rps=$(wrk -t2 -c16 -d"${secs}s" -H 'Authorization: Bearer bench' \
          -H 'User-Agent: bench/1' "$url$2" | awk '/^Requests\/sec:/ {printf "%d", $2}')
  t1=$(ticks)
  # The fake's own CPU use: wrk runs on the same machine, so a fake well
  # below 100% of a core is not what limits the figure.
  cpu=$(( (t1 - t0) * 100 / (hz * secs) ))
  # Requests per CPU-second of the fake: what it could serve with a core to
  # itself, whatever else the machine is doing.
  per_cpu=$(( rps * hz * secs / ((t1 - t0) > 0 ? (t1 - t0) : 1) ))
  echo "$1: $rps requests/s (fake at $cpu% of one core; $per_cpu per CPU-second)"
  if [ -z "$min" ] || [ "$rps" -lt "$min" ]; then min=$rps; fi
}
run "get-by-id" "/load_balancers/20"
run "list-by-selector" "/load_balancers?label_selector=robotlb%2Fservice-uid%3Duid-20"
run "list-by-name" "/load_balancers?name=svc-7.default"
run "list-page-25" "/load_balancers?per_page=25"
echo "min: $min requests/s"
