#!/usr/bin/env bash
# The reload benchmark (not part of make test; root): what a reload that changes one backend costs
# with many services. ferryd runs in a netns of its own with one veth for XDP and
# UDP_SERVICES + TCP_SERVICES services of 8 backends each (gen_config.py); the config then flips
# between itself and a copy where one UDP and one TCP service have a ninth backend, RELOADS times.
# Prints the seconds each `ferryctl reload` took and ferryd's RSS before and after each, then the
# same for `ferryctl backend` steps (drain, enable, weight, disable) on one UDP and one TCP backend.
#
#   tests/bench/reload/run.sh [BUILD_DIR]       (default: build)
#   UDP_SERVICES=500 TCP_SERVICES=500 RELOADS=6 tests/bench/reload/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-$root/build}
udp=${UDP_SERVICES:-500}; tcp=${TCP_SERVICES:-500}; reloads=${RELOADS:-6}
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (netns, XDP)" >&2; exit 1; }
[ -x "$build/daemon/ferryd" ] || { echo "run.sh: no $build/daemon/ferryd; build it first" >&2; exit 1; }
ns="frl$$"; work=$(mktemp -d /tmp/ferry-reload.XXXXXX); pid=""
cleanup() {
  set +e
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link add rl0 type veth peer name rl1
for l in lo rl0 rl1; do ip -n "$ns" link set "$l" up; done
python3 "$here/gen_config.py" "$udp" "$tcp" rl0 "$work/ferryd.sock" >"$work/a.json"
python3 "$here/gen_config.py" "$udp" "$tcp" rl0 "$work/ferryd.sock" --one-more >"$work/b.json"
cp "$work/a.json" "$work/ferryd.json"
ip netns exec "$ns" "$build/daemon/ferryd" --config "$work/ferryd.json" >"$work/ferryd.log" 2>&1 &
pid=$!
ctl() { "$build/daemon/ferryctl" --socket "$work/ferryd.sock" "$@"; }
for _ in $(seq 300); do ctl status >/dev/null 2>&1 && break; sleep 0.1; done
ctl status >/dev/null || { cat "$work/ferryd.log" >&2; exit 1; }
rss() { awk '/^VmRSS/ {print $2 / 1024 " MiB"}' "/proc/$pid/status"; }
echo "$udp UDP + $tcp TCP services of 8 backends ($(stat -c %s "$work/a.json") bytes of config); RSS at start $(rss)"
for i in $(seq "$reloads"); do
  if (( i % 2 )); then cp "$work/b.json" "$work/ferryd.json"; what="one backend added"; else
    cp "$work/a.json" "$work/ferryd.json"; what="one backend removed"; fi
  t0=$(date +%s.%N); ctl reload >/dev/null; t1=$(date +%s.%N)
  printf 'reload %d (%s): %.3f s, RSS %s\n' "$i" "$what" "$(awk "BEGIN{print $t1 - $t0}")" "$(rss)"
done
# Then the `backend` command on one backend of the first UDP and the first TCP service: each
# step's seconds (ferryctl's round trip: the steering change and the tables it rebuilds) and RSS.
first() {  # PROTOCOL: "NAME ADDRESS" of the first service of PROTOCOL and its first backend
  python3 - "$work/ferryd.json" "$1" <<'PY'
import json, sys
s = next(x for x in json.load(open(sys.argv[1]))["services"] if sys.argv[2] in x["protocols"])
b = s["backends"][0]
print(s["name"], b if isinstance(b, str) else b["address"])
PY
}
for protocol in udp tcp; do
  read -r name address < <(first "$protocol")
  for step in drain enable "weight 3" "weight 1" disable enable; do
    t0=$(date +%s.%N); ctl backend "$name" "$address" $step >/dev/null; t1=$(date +%s.%N)
    printf 'backend %s %s %s: %.3f s, RSS %s\n' "$name" "$address" "$step" \
      "$(awk "BEGIN{print $t1 - $t0}")" "$(rss)"
  done
done
