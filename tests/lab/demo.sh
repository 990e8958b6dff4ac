#!/usr/bin/env bash
# `make demo`: a private netns lab (client -- gateway gw0/gw1 -- backends), ferryd on
# etc/ferry/demo.json in the gateway, UDP traffic through it, live `ferryctl watch`, a summary,
# and removal of everything it created, also on Ctrl-C or failure.
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FERRYD=$ROOT/$BUILD/daemon/ferryd
FERRYCTL=$ROOT/$BUILD/daemon/ferryctl
SECONDS_TO_WATCH=${DEMO_SECONDS:-30}
TAG=fdemo$$
NS_CLIENT=$TAG-client NS_GW=$TAG-gw NS_BACK=$TAG-back
SOCK=/run/ferry/demo.sock
WORK=$(mktemp -d /tmp/ferry-demo.XXXXXX)
FERRYD_PID="" TRAFFIC_PID="" SINK_PID=""

if [ "$(id -u)" != 0 ]; then echo "make demo needs root (network namespaces, XDP)"; exit 1; fi

cleanup() {
  set +e
  [ -n "$TRAFFIC_PID" ] && kill "$TRAFFIC_PID" 2>/dev/null
  [ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null
  if [ -n "$FERRYD_PID" ] && kill -0 "$FERRYD_PID" 2>/dev/null; then
    kill -TERM "$FERRYD_PID"; wait "$FERRYD_PID" 2>/dev/null
  fi
  for ns in "$NS_CLIENT" "$NS_GW" "$NS_BACK"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$WORK"
  echo "demo lab removed"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== building the lab: $NS_CLIENT -- $NS_GW (gw0, gw1: 2 queues each) -- $NS_BACK"
for ns in "$NS_CLIENT" "$NS_GW" "$NS_BACK"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip -n "$NS_GW" link add gw0 numrxqueues 2 numtxqueues 2 type veth peer name c0 netns "$NS_CLIENT" numrxqueues 2 numtxqueues 2
ip -n "$NS_GW" link add gw1 numrxqueues 2 numtxqueues 2 type veth peer name b0 netns "$NS_BACK" numrxqueues 2 numtxqueues 2
ip -n "$NS_GW" addr add 10.77.0.1/24 dev gw0
ip -n "$NS_GW" addr add 10.77.0.10/32 dev gw0
ip -n "$NS_GW" addr add 10.77.1.1/24 dev gw1
ip -n "$NS_CLIENT" addr add 10.77.0.2/24 dev c0
for a in 2 3 4; do ip -n "$NS_BACK" addr add 10.77.1.$a/24 dev b0; done
for pair in "$NS_GW gw0" "$NS_GW gw1" "$NS_CLIENT c0" "$NS_BACK b0"; do
  set -- $pair; ip -n "$1" link set "$2" up
done
ip -n "$NS_CLIENT" route add default via 10.77.0.1
ip -n "$NS_BACK" route add default via 10.77.1.1
ip netns exec "$NS_GW" sysctl -qw net.ipv4.ip_forward=1

echo "== starting ferryd on etc/ferry/demo.json"
ip netns exec "$NS_GW" "$FERRYD" --config "$ROOT/etc/ferry/demo.json" >"$WORK/ferryd.log" 2>&1 &
FERRYD_PID=$!
for _ in $(seq 100); do
  [ -S "$SOCK" ] && "$FERRYCTL" --socket "$SOCK" status >/dev/null 2>&1 && break
  kill -0 "$FERRYD_PID" 2>/dev/null || { cat "$WORK/ferryd.log"; echo "ferryd failed to start"; exit 1; }
  sleep 0.1
done
"$FERRYCTL" --socket "$SOCK" status

echo "== UDP traffic: client -> 10.77.1.{2,3,4}:5353 through the gateway (bounded: ${SECONDS_TO_WATCH}s)"
ip netns exec "$NS_BACK" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 5353))
while True: s.recvfrom(2048)' &
SINK_PID=$!
ip netns exec "$NS_CLIENT" python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.monotonic() + float(sys.argv[1]); n = 0
while time.monotonic() < end:
    s.sendto(b"ferry-demo" * 6, ("10.77.1.%d" % (2 + n % 3), 5353)); n += 1
    if n % 200 == 0: time.sleep(0.01)' "$SECONDS_TO_WATCH" &
TRAFFIC_PID=$!

"$FERRYCTL" --socket "$SOCK" watch ferry_xdp --count "$SECONDS_TO_WATCH" || true

echo "== summary"
"$FERRYCTL" --socket "$SOCK" stats ferry_xdp
"$FERRYCTL" --socket "$SOCK" services
