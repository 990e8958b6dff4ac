#!/usr/bin/env bash
# `make demo`: a private netns lab (client -- gateway gw0/gw1, two queues each -- three backends),
# ferryd on etc/ferry/demo.json in the gateway, UDP traffic balanced on the AF_XDP path and TCP
# traffic through the io_uring proxy, the live `ferryctl top`, a summary, and removal of everything
# it created, also on Ctrl-C or failure.
#
#   tests/lab/demo.sh [BUILD_DIR]      DEMO_SECONDS=30 (how long traffic runs and top shows);
#                                      FERRYD, FERRYCTL override the binaries of BUILD_DIR
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FERRYD=${FERRYD:-$ROOT/$BUILD/daemon/ferryd}
FERRYCTL=${FERRYCTL:-$ROOT/$BUILD/daemon/ferryctl}
SECONDS_TO_WATCH=${DEMO_SECONDS:-30}
TAG=fdemo$$
NS_CLIENT=$TAG-client NS_GW=$TAG-gw NS_BACK=$TAG-back
SOCK=/run/ferry/demo.sock
VIP=10.77.0.10
WORK=$(mktemp -d /tmp/ferry-demo.XXXXXX)
FERRYD_PID="" CLIENT_PID="" BACKEND_PIDS=()

if [ "$(id -u)" != 0 ]; then echo "make demo needs root (network namespaces, XDP)"; exit 1; fi
for tool in "$FERRYD" "$FERRYCTL"; do
  [ -x "$tool" ] || { echo "missing $tool: run 'make build' first"; exit 1; }
done

cleanup() {
  set +e
  [ -n "$CLIENT_PID" ] && kill "$CLIENT_PID" 2>/dev/null
  for pid in "${BACKEND_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  local ferryd_status=0
  if [ -n "$FERRYD_PID" ]; then
    kill -0 "$FERRYD_PID" 2>/dev/null && kill -TERM "$FERRYD_PID"
    wait "$FERRYD_PID" 2>/dev/null; ferryd_status=$?
  fi
  # A crash, or a sanitizer report at exit in a sanitized build, fails the demo with its log.
  [ "$ferryd_status" = 0 ] || { echo "ferryd exited with $ferryd_status:"; tail -n 60 "$WORK/ferryd.log"; }
  wait 2>/dev/null
  for ns in "$NS_CLIENT" "$NS_GW" "$NS_BACK"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$WORK"
  echo "demo lab removed"
  [ "$ferryd_status" = 0 ] || exit 1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== building the lab: $NS_CLIENT -- $NS_GW (gw0, gw1: 2 queues each) -- $NS_BACK"
for ns in "$NS_CLIENT" "$NS_GW" "$NS_BACK"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip -n "$NS_GW" link add gw0 numrxqueues 2 numtxqueues 2 type veth peer name c0 netns "$NS_CLIENT" numrxqueues 2 numtxqueues 2
ip -n "$NS_GW" link add gw1 numrxqueues 2 numtxqueues 2 type veth peer name b0 netns "$NS_BACK" numrxqueues 2 numtxqueues 2
ip -n "$NS_GW" addr add 10.77.0.1/24 dev gw0
ip -n "$NS_GW" addr add $VIP/32 dev gw0
ip -n "$NS_GW" addr add 10.77.1.1/24 dev gw1
ip -n "$NS_CLIENT" addr add 10.77.0.2/24 dev c0
for a in 2 3 4; do ip -n "$NS_BACK" addr add 10.77.1.$a/24 dev b0; done
for pair in "$NS_GW gw0" "$NS_GW gw1" "$NS_CLIENT c0" "$NS_BACK b0"; do
  set -- $pair; ip -n "$1" link set "$2" up
done
ip -n "$NS_CLIENT" route add default via 10.77.0.1
ip -n "$NS_BACK" route add default via 10.77.1.1
ip netns exec "$NS_GW" sysctl -qw net.ipv4.ip_forward=1
# The senders' veths keep their default offloads: the client's and the backends' UDP leaves with
# only the pseudo-header sum in its checksum field (CHECKSUM_PARTIAL), as containers, pods and
# local backends send it, and ferry completes it when it rewrites the datagram.

echo "== three backends in $NS_BACK: UDP echo on :5353, TCP responses on :8080"
for a in 2 3 4; do
  ip netns exec "$NS_BACK" python3 "$ROOT/tests/lab/demo_backend.py" "backend-$a" 10.77.1.$a &
  BACKEND_PIDS+=($!)
done

echo "== starting ferryd on etc/ferry/demo.json"
ip netns exec "$NS_GW" "$FERRYD" --config "$ROOT/etc/ferry/demo.json" >"$WORK/ferryd.log" 2>&1 &
FERRYD_PID=$!
for _ in $(seq 100); do
  [ -S "$SOCK" ] && "$FERRYCTL" --socket "$SOCK" status >/dev/null 2>&1 && break
  kill -0 "$FERRYD_PID" 2>/dev/null || { cat "$WORK/ferryd.log"; echo "ferryd failed to start"; exit 1; }
  sleep 0.1
done
sleep 2.5  # two health-check rounds: the backends are seen up before the traffic starts
"$FERRYCTL" --socket "$SOCK" services

echo "== traffic for ${SECONDS_TO_WATCH}s: UDP to $VIP:5353 (AF_XDP, Maglev), TCP to $VIP:8080 (io_uring proxy)"
ip netns exec "$NS_CLIENT" python3 "$ROOT/tests/lab/demo_client.py" --vip $VIP \
  --seconds "$SECONDS_TO_WATCH" --out "$WORK/client.json" &
CLIENT_PID=$!

# The live view: redrawn in place every second on a terminal; elsewhere (a log, CI) a frame
# every 5 s, so the output stays readable.
if [ -t 1 ]; then
  "$FERRYCTL" --socket "$SOCK" top --backends --count "$SECONDS_TO_WATCH" || true
else
  "$FERRYCTL" --socket "$SOCK" top --backends --interval-ms 5000 \
    --count $(( SECONDS_TO_WATCH / 5 > 0 ? SECONDS_TO_WATCH / 5 : 1 )) || true
fi
wait "$CLIENT_PID" || true
CLIENT_PID=""

echo
echo "== summary"
python3 "$ROOT/tests/lab/demo_summary.py" "$WORK/client.json" \
  <("$FERRYCTL" --socket "$SOCK" --json stats ferry_)
# A datagram whose checksum its receiver rejects never reaches a socket: Udp InCsumErrors counts it.
udp_csum_errors() {
  ip netns exec "$1" awk '/^Udp:/ { if (!seen++) { for (i = 2; i <= NF; i++) if ($i == "InCsumErrors") col = i } else print $col }' /proc/net/snmp
}
echo "UDP checksum errors at the receivers (Udp InCsumErrors): client $(udp_csum_errors "$NS_CLIENT"), backends $(udp_csum_errors "$NS_BACK")"
