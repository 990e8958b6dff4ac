#!/usr/bin/env bash
# The lab benchmark (not part of make test; needs root): in a netns lab on this machine
# (client c0 -- g0 gateway g1 -- b0 sink), ferry's route and balance forwarding next to
# (a) the kernel's own forwarding (ip_forward; nftables DNAT for balance) and (b) an in-kernel XDP
# redirect between the same veths (xdp_redirect.bpf.c, DEVMAP + MAC rewrite) as the ceiling.
# trafgen (netsniff-ng) offers 64-byte and 1500-byte UDP from one CPU; the sink's veth counts
# what arrives (rx_packets, with an XDP drop behind it so the sink's stack costs nothing). For
# each run: delivered pps and gateway CPU per delivered packet = softirq time (/proc/stat, all
# CPUs) + ferryd's own CPU time. Writes tests/bench/results/lab.md.
# Checksums: trafgen (a packet socket) writes complete UDP checksums, what a real NIC delivers
# ("full"); a local stack sending over veth (containers, pods, VMs, local backends) leaves only the
# pseudo-header sum in the field (CHECKSUM_PARTIAL), which "partial" makes trafgen write: the
# folded, not complemented, ones'-complement sum of the IPv4 pseudo header, one constant per size
# and destination (it does not depend on the ports), byte for byte what a UDP socket's datagram
# carries over a veth with transmit checksum offload on. Every forwarder runs with both.
# Usage: tests/bench/lab/run.sh [BUILD_DIR]   (default: build; ferryd must be built)
#        SECONDS_PER_RUN=5 SIZES="64 1500" CHECKSUMS="partial full" tests/bench/lab/run.sh
# AFFINITY=1 measures instead the cost of the UDP flow table: ferry balance alone with the
# service's "affinity" "flow" (the default: a flow-table lookup per request, 59,000 flows) and
# "none" (pure Maglev), alternated REPEATS times (default 3) in the same lab, and writes
# tests/bench/results/flows.md.
# IPHOP=1 measures instead the IP hop (docs/fastpath.md, "ferry as an IP hop"): balance of 2,008-byte
# UDP datagrams sent as two IPv4 fragments (a first with the UDP header, a second without ports
# that follows it through the worker's fragment table) and of unfragmented 64-byte datagrams,
# ferry next to nftables DNAT (conntrack reassembles and fragments again) in the same run, REPEATS
# times alternated, and writes tests/bench/results/ip-hop.md. Its ICMP row: port-unreachable errors
# from a backend about 1,000 balanced flows (icmp_errors.py, sent from the backend's side), which
# ferry turns into errors from the VIP quoting the client's datagram to the VIP, next to conntrack
# doing the same for the flows' DNAT entries (made by the client's datagrams just before).
# QUIC=1 measures instead QUIC-LB routing (docs/quic.md): balance of QUIC short-header packets
# whose connection IDs name the three backends' server IDs, with the service's quic_lb in each
# form (plaintext, single_pass, four_pass; CIDs from tests/quic/ferry_quic_cid_encode) next to
# the same packets with quic_lb off (maglev: the 4-tuple, flow table), full checksums, alternated
# REPEATS times, and writes tests/bench/results/quic-lab.md.
# DSR=1 measures instead direct server return (docs/dsr.md): balance with the bench service's
# "forwarding" nat (today's rewrite), ipip and gue (the request inside an outer header to the
# backend, xdp.encap's source the gateway's g1 address), next to the kernel's forwarding, its DNAT
# (nftables; this kernel has no ipip/fou devices to encapsulate with) and the in-kernel XDP
# redirect, alternated
# REPEATS times, and writes tests/bench/results/dsr-lab.md. The backend side (g1, b0) runs an MTU
# of 1600, as a DSR network does, so 1500-byte frames fit once encapsulated.
# FERRYD_B=PATH measures instead this tree's ferryd next to another build's (PATH, e.g. a previous
# revision's) and to this one with FERRY_XSK_IGNORE_XDP_MATCH=1 (the worker matches every frame
# itself), balance only, alternated REPEATS times, and writes tests/bench/results/lab-ab.md.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
build="${1:-$root/build}"
ferryd="$build/daemon/ferryd"
ferryctl="$build/daemon/ferryctl"
secs="${SECONDS_PER_RUN:-5}"
sizes="${SIZES:-64 1500}"
checksums="${CHECKSUMS:-partial full}"
for c in $checksums; do
  case "$c" in partial|full) ;; *) echo "run.sh: CHECKSUMS takes partial and/or full, not '$c'" >&2; exit 1;; esac
done
out="$root/tests/bench/results/lab.md"
affinity_mode="${AFFINITY:-}"
iphop_mode="${IPHOP:-}"
quic_mode="${QUIC:-}"
dsr_mode="${DSR:-}"
repeats="${REPEATS:-3}"
[ -n "$affinity_mode" ] && out="$root/tests/bench/results/flows.md"
[ -n "$iphop_mode" ] && out="$root/tests/bench/results/ip-hop.md"
[ -n "$quic_mode" ] && out="$root/tests/bench/results/quic-lab.md" && checksums=full
[ -n "$dsr_mode" ] && out="$root/tests/bench/results/dsr-lab.md" && checksums=full
ferryd_b="${FERRYD_B:-}"
[ -n "$ferryd_b" ] && out="$root/tests/bench/results/lab-ab.md"
[ -z "$ferryd_b" ] || [ -x "$ferryd_b" ] || { echo "run.sh: FERRYD_B=$ferryd_b is not a program" >&2; exit 1; }
ferry_env=""  # VAR=value words ferryd starts with

for tool in trafgen nft bpftool clang; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool missing (apt-get install netsniff-ng nftables bpftool clang)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (netns, XDP)" >&2; exit 1; }
[ -x "$ferryd" ] || { echo "run.sh: no $ferryd; build it first (meson compile -C $build)" >&2; exit 1; }

tag="flab$$"
C="$tag-c"; G="$tag-g"; B="$tag-b"
work="$(mktemp -d /tmp/ferry-lab.XXXXXX)"
bpffs="/run/ferry-lab-$$"  # not under /sys: `ip netns exec` remounts /sys
ferry_pid=""
VIP=10.10.100.10; ROUTED=10.10.3.5; PORT=5300

cleanup() {
  set +e
  [ -n "$ferry_pid" ] && kill "$ferry_pid" 2>/dev/null && wait "$ferry_pid" 2>/dev/null
  for ns in "$C" "$G" "$B"; do ip netns del "$ns" 2>/dev/null; done
  mountpoint -q "$bpffs" && umount "$bpffs"
  rmdir "$bpffs" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

in_ns() { local ns="$1"; shift; ip netns exec "$ns" "$@"; }
mac_of() { in_ns "$1" cat "/sys/class/net/$2/address"; }
mac_csv() { echo "$1" | sed 's/^/0x/; s/:/,0x/g'; }

# ---- the lab: one queue per veth, so one ferry worker, pinned away from the generator's CPU
for ns in "$C" "$G" "$B"; do
  ip netns add "$ns"
  in_ns "$ns" ip link set lo up
  in_ns "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip -n "$C" link add c0 type veth peer name g0 netns "$G"
ip -n "$G" link add g1 type veth peer name b0 netns "$B"
ip -n "$C" addr add 10.10.1.2/24 dev c0
ip -n "$G" addr add 10.10.1.1/24 dev g0
ip -n "$G" addr add 10.10.2.1/24 dev g1
for a in 10.10.2.2 10.10.2.3 10.10.2.4; do ip -n "$B" addr add "$a/24" dev b0; done
ip -n "$B" addr add "$ROUTED/32" dev b0
for l in "$C c0" "$G g0" "$G g1" "$B b0"; do set -- $l; ip -n "$1" link set "$2" up; done
ip -n "$C" route add default via 10.10.1.1
if [ -n "$dsr_mode" ]; then ip -n "$G" link set g1 mtu 1600; ip -n "$B" link set b0 mtu 1600; fi
ip -n "$B" route add default via 10.10.2.1
ip -n "$G" route add 10.10.3.0/24 via 10.10.2.2 dev g1
in_ns "$G" sysctl -qw net.ipv4.ip_forward=1

g0_mac="$(mac_of "$G" g0)"; g1_mac="$(mac_of "$G" g1)"; b0_mac="$(mac_of "$B" b0)"; c0_mac="$(mac_of "$C" c0)"
clang -target bpf -O2 -g -Wall -Werror -I "/usr/include/$(gcc -dumpmachine)" \
  -DDST_MAC="$(mac_csv "$b0_mac")" -DSRC_MAC="$(mac_csv "$g1_mac")" \
  -c "$root/tests/bench/lab/xdp_redirect.bpf.c" -o "$work/xdp_redirect.bpf.o"
mkdir -p "$bpffs" && mount -t bpf bpf "$bpffs"
bpftool prog loadall "$work/xdp_redirect.bpf.o" "$bpffs/prog" type xdp pinmaps "$bpffs/maps"
g1_ifindex="$(in_ns "$G" cat /sys/class/net/g1/ifindex)"
# A DEVMAP resolves the ifindex in the updating process's namespace: update from inside G.
in_ns "$G" bpftool map update pinned "$bpffs/maps/egress" key 0 0 0 0 value \
  $(printf '%d %d %d %d' $((g1_ifindex & 255)) $((g1_ifindex >> 8 & 255)) $((g1_ifindex >> 16 & 255)) $((g1_ifindex >> 24)))
in_ns "$B" bpftool net attach xdpdrv pinned "$bpffs/prog/xdp_sink" dev b0
# Next hops known to the kernel before anything is measured.
for a in 10.10.2.2 10.10.2.3 10.10.2.4; do in_ns "$G" ping -c1 -W1 "$a" >/dev/null; done
in_ns "$C" ping -c1 -W1 10.10.1.1 >/dev/null

# write_config [AFFINITY [QUIC_LB_JSON SERVER_ID...]]: the bench service's affinity (flow, the
# default, or none); with QUIC_LB_JSON its quic_lb section and the three backends' server IDs.
# $forwarding (nat unless set) is the service's forwarding mode.
forwarding=nat
write_config() {
  local backends="\"10.10.2.2:$PORT\", \"10.10.2.3:$PORT\", \"10.10.2.4:$PORT\"" quic_lb=""
  local encap=""
  [ "$forwarding" != nat ] && encap=', "encap": { "source": "10.10.2.1" }'
  if [ $# -ge 5 ]; then
    quic_lb="\"quic_lb\": $2,"
    backends="{ \"address\": \"10.10.2.2:$PORT\", \"server_id\": \"$3\" },
                  { \"address\": \"10.10.2.3:$PORT\", \"server_id\": \"$4\" },
                  { \"address\": \"10.10.2.4:$PORT\", \"server_id\": \"$5\" }"
  fi
  cat >"$work/ferryd.json" <<JSON
{
  "control": { "socket": "$work/ferryd.sock", "group": null },
  "metrics": { "listen": null },
  "log": { "level": "notice" },
  "xdp": { "interfaces": [ { "name": "g0" }, { "name": "g1" } ]$encap },
  "services": [ { "name": "bench", "vip": "$VIP", "port": $PORT, "protocols": ["udp"],
                  "affinity": "${1:-flow}", "forwarding": "$forwarding", $quic_lb
                  "backends": [$backends] } ],
  "routes": [ { "prefix": "10.10.3.0/24", "via": "g1" } ]
}
JSON
}
write_config flow

start_ferryd() {
  # ferryd's worker may only use CPU 1; trafgen runs on CPU 0. nice -15: the kernel's forwarding
  # runs in softirq, which preempts whatever else runs on a shared machine; a user-space worker
  # would instead share its CPU with it (a deployment isolates the workers' CPUs).
  ip netns exec "$G" env $ferry_env nice -n -15 taskset -c 1 "$ferryd" --config "$work/ferryd.json" \
    >"$work/ferryd.log" 2>&1 &
  ferry_pid=$!
  for _ in $(seq 100); do
    "$ferryctl" --socket "$work/ferryd.sock" status >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  cat "$work/ferryd.log" >&2
  return 1
}
stop_ferryd() { kill "$ferry_pid"; wait "$ferry_pid" || true; ferry_pid=""; }

# /proc/stat "cpu" line: user nice system idle iowait irq softirq steal (USER_HZ ticks).
softirq_ticks() { awk '/^cpu /{print $8}' /proc/stat; }
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
proc_ticks() { if [ -n "$1" ]; then awk '{print $14, $15}' "/proc/$1/stat"; else echo 0 0; fi; }
# ferry's own view of what it lost: "kernel worker" = frames the kernel dropped at the sockets
# (rx ring full, fill ring empty) and frames the worker dropped (any reason); then the partial
# checksums it finished (ferry_xsk_checksums_finished_total{kind="partial"}).
# `ferry_stats PROGRAM [ARG...]`: runs the Python PROGRAM over ferryd's `ferryctl stats --json`,
# with `fams` (metric name -> samples) and `total(name, **labels)` (the sum of the samples that
# carry those labels) defined.
ferry_stats() {
  local program="$1"; shift
  "$ferryctl" --socket "$work/ferryd.sock" stats --json | python3 -c '
import collections, json, sys
fams = {f["name"]: f["samples"] for f in json.load(sys.stdin)["result"]["metrics"]}
def total(name, **labels):
    return int(sum(s["value"] for s in fams.get(name, [])
                   if all(s["labels"].get(k) == v for k, v in labels.items())))
'"$program" "$@"
}
ferry_losses() {
  if [ -z "$ferry_pid" ]; then echo "0 0 0"; return; fi
  ferry_stats 'print(total("ferry_xsk_kernel_drops_total") + total("ferry_xsk_fill_ring_empty_total"),
      total("ferry_xsk_drops_total"), total("ferry_xsk_checksums_finished_total", kind="partial"))'
}
# Where the offered traffic leaves and where it is counted: the client's veth and the sink's, the
# other way round for the ICMP row (errors from the backend's side to the client).
gen_ns="$C"; gen_dev=c0; sink_ns="$B"; sink_dev=b0
sink_rx() { in_ns "$sink_ns" cat "/sys/class/net/$sink_dev/statistics/rx_packets"; }
client_tx() { in_ns "$gen_ns" cat "/sys/class/net/$gen_dev/statistics/tx_packets"; }

CLIENT_IP=10.10.1.2
# The UDP checksum field a local stack leaves with transmit checksum offload on (CHECKSUM_PARTIAL):
# the ones'-complement sum of the pseudo header (source, destination, zero + protocol 17, UDP
# length), folded to 16 bits, not complemented. The ports do not enter it.
partial_csum() {  # src dst udp_length
  local a b s
  IFS=. read -r -a a <<<"$1"; IFS=. read -r -a b <<<"$2"
  s=$(( (a[0] << 8 | a[1]) + (a[2] << 8 | a[3]) + (b[0] << 8 | b[1]) + (b[2] << 8 | b[3]) + 17 + $3 ))
  while (( s >> 16 )); do s=$(( (s & 0xffff) + (s >> 16) )); done
  printf '0x%04x' "$s"
}
# trafgen config: UDP of `size` bytes on the wire (without FCS) to dst, source ports cycling so
# that the flows spread over backends and queues; checksum "full" is trafgen's own (complete,
# computed per packet), "partial" the constant above.
traffic() {
  if [ "$3" = frag2008 ]; then fragmented_traffic "$1" "$2"; return; fi
  if [ "$3" = icmp ]; then
    python3 "$root/tests/bench/lab/icmp_errors.py" "$g1_mac" "$b0_mac" "$ICMP_BACKEND" "$CLIENT_IP" \
      "$PORT" "$ICMP_FIRST_SPORT" "$ICMP_FLOWS"
    return
  fi
  local dst="$1" dport="$2" size="$3" checksum="$4" fill=$(( $3 - 42 )) csum="" cid
  [ "$checksum" = partial ] && csum=", csum=$(partial_csum "$CLIENT_IP" "$dst" $(( size - 34 )))"
  if [ -n "$quic_mode" ]; then  # one packet per server: a short header (0x40) and its CID first
    for cid in "${quic_cids[@]}"; do
      echo "{ eth(da=$g0_mac, sa=$c0_mac), ipv4(saddr=$CLIENT_IP, daddr=$dst, ttl=64), udp(sp=dinc(1000, 60000), dp=$dport$csum), 0x40, $(echo "$cid" | sed 's/../0x&, /g')fill(0x41, $(( fill - 1 - ${#cid} / 2 ))) }"
    done
    return
  fi
  echo "{ eth(da=$g0_mac, sa=$c0_mac), ipv4(saddr=$CLIENT_IP, daddr=$dst, ttl=64), udp(sp=dinc(1000, 60000), dp=$dport$csum), fill(0x41, $fill) }"
}

# quic_form FORM: the bench service's config for FORM (maglev: quic_lb off) and quic_cids, the
# connection IDs the three backends' servers issue (maglev sends plaintext's).
QUIC_KEY=8f95f09245765f80256934e50c66207f
quic_form() {
  local id sid nonce key="" json sids=() server
  case "$1" in
    maglev|plaintext) id=0 sid=2 nonce=6 ;;
    single_pass) id=1 sid=3 nonce=13 key="$QUIC_KEY" ;;
    four_pass) id=2 sid=2 nonce=6 key="$QUIC_KEY" ;;
  esac
  quic_cids=()
  for server in 11 22 33; do
    sids+=("$(printf "%0$((2 * sid - 2))d%s" 0 "$server")")
    quic_cids+=("$("$build/tests/quic/ferry_quic_cid_encode" \
      "config_id=$id,server_id=${sids[-1]},nonce_bytes=$nonce${key:+,key=$key}" \
      "$(printf '%02x' $(seq 1 "$nonce"))")")
  done
  json="{ \"configs\": [ { \"id\": $id, \"server_id_bytes\": $sid, \"nonce_bytes\": $nonce, \"key\": $([ -n "$key" ] && echo "\"$key\"" || echo null) } ] }"
  if [ "$1" = maglev ]; then write_config flow; else write_config flow "$json" "${sids[@]}"; fi
}

# Two IPv4 fragments per datagram of 2,008 UDP bytes: the first (MF, offset 0) holds the UDP header
# and 1,472 bytes, the second (offset 185 x 8 = 1,480) the last 528 bytes. trafgen sends the two
# packets of the config in turn, each with its own dinc() counter, so their identifications agree.
# No UDP checksum (0, legal on IPv4): the sink drops the fragments in XDP without reading them.
fragmented_traffic() {
  local dst="$1" dport="$2"
  echo "{ eth(da=$g0_mac, sa=$c0_mac), ipv4(saddr=$CLIENT_IP, daddr=$dst, ttl=64, id=dinc(1, 65000), mf), udp(sp=dinc(1000, 60000), dp=$dport, len=2008, csum=0), fill(0x41, 1472) }"
  echo "{ eth(da=$g0_mac, sa=$c0_mac), ipv4(saddr=$CLIENT_IP, daddr=$dst, ttl=64, id=dinc(1, 65000), frag=185, proto=17), fill(0x41, 528) }"
}

# The kernel's balance baseline: nftables DNAT over the three backends (conntrack). With `icmp`,
# every flow goes to the one backend whose errors the ICMP row sends, and a counter after the
# reply's NAT counts the errors that leave translated (from the VIP).
# The ICMP flows use source ports the other rows never send from (they cycle 1000..60000), so no
# conntrack entry of theirs, DNATed elsewhere, still lives when the ICMP row opens its own.
ICMP_BACKEND=10.10.2.2; ICMP_FIRST_SPORT=61000; ICMP_FLOWS=1000
nat_on() {
  local target="jhash ip saddr . udp sport mod 3 map { 0 : 10.10.2.2, 1 : 10.10.2.3, 2 : 10.10.2.4 }"
  [ "${1:-}" = icmp ] && target="$ICMP_BACKEND"
  in_ns "$G" nft -f - <<NFT
table ip ferrylab {
  chain pre {
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr $VIP udp dport $PORT dnat to $target
  }
  chain post {
    type filter hook postrouting priority srcnat + 10; policy accept;
    ip saddr $VIP icmp type destination-unreachable counter
  }
}
NFT
}
# Errors that left translated so far: ferry's counter, or the kernel baseline's nftables counter.
icmp_translated() {
  if [ -n "$ferry_pid" ]; then
    ferry_stats 'print(total("ferry_xsk_icmp_translated_total"))'
  else
    in_ns "$G" nft list chain ip ferrylab post | sed -n 's/.*counter packets \([0-9]*\).*/\1/p'
  fi
}
# ferryd's worker drops by reason, a line "case reason count" each: ferryd starts afresh for every
# case of IPHOP's rounds, so its totals (warm-up included) are the case's own.
ferry_drop_reasons() {
  ferry_stats '
by = collections.Counter()
for s in fams.get("ferry_xsk_drops_total", []):
    by[s["labels"].get("reason", "?")] += int(s["value"])
for reason, n in by.items():
    if n:
        print(sys.argv[1], reason, n)' "$1"
}
# Before the ICMP row: each of its flows sends a datagram through the gateway, as a client does
# before a backend can answer it with an error (conntrack needs the flow's entry to translate it).
icmp_flows_open() {
  echo "{ eth(da=$g0_mac, sa=$c0_mac), ipv4(saddr=$CLIENT_IP, daddr=$VIP, ttl=64), udp(sp=dinc($ICMP_FIRST_SPORT, $((ICMP_FIRST_SPORT + ICMP_FLOWS - 1))), dp=$PORT), fill(0x41, 22) }" \
    >"$work/open.cfg"
  in_ns "$C" trafgen --dev c0 --conf "$work/open.cfg" --cpus 1 -n "$((2 * ICMP_FLOWS))" >/dev/null 2>&1
}

hz="$(getconf CLK_TCK)"
# report_kinds TITLE COMMAND NOTE BASELINE KIND...: the side-by-side modes' table (report_kinds.py).
report_kinds() {
  mkdir -p "$(dirname "$out")"
  python3 "$root/tests/bench/lab/report_kinds.py" "$results" "$hz" "$secs" "$load_before" "$repeats" \
    "$@" >"$out"
}
results="$work/results.tsv"
measure() {  # kind case size dst dport; one row per checksum kind
  local checksum
  for checksum in $checksums; do measure_one "$1" "$2" "$3" "$checksum" "$4" "$5"; done
}
measure_one() {  # kind case size checksum dst dport
  local kind="$1" case="$2" size="$3" checksum="$4" dst="$5" dport="$6"
  traffic "$dst" "$dport" "$size" "$checksum" >"$work/t.cfg"
  # conntrack verifies the UDP checksum of what it has to (nf_conntrack_checksum=1): trafgen's
  # frames reach it as CHECKSUM_NONE, so it verifies a partial one, finds it wrong and leaves the
  # datagram unNATed (0 delivered, measured here). A real local sender's datagram arrives as
  # CHECKSUM_PARTIAL, which conntrack trusts without verifying, and is DNATed: for "partial" the
  # baseline is given that treatment (no verification); for "full" it verifies, as before.
  if [ "$kind $case" = "kernel balance" ]; then
    in_ns "$G" sysctl -qw net.netfilter.nf_conntrack_checksum=$([ "$checksum" = partial ] && echo 0 || echo 1)
  fi
  if [ "$size" = icmp ]; then
    gen_ns="$B"; gen_dev=b0; sink_ns="$C"; sink_dev=c0
    icmp_flows_open
  else
    gen_ns="$C"; gen_dev=c0; sink_ns="$B"; sink_dev=b0
  fi
  in_ns "$gen_ns" trafgen --dev "$gen_dev" --conf "$work/t.cfg" --cpus 1 -n 20000 >/dev/null 2>&1  # warm-up
  sleep 1
  local tr0 tr1
  [ "$size" = icmp ] && tr0=$(icmp_translated)
  local rx0 tx0 si0 bu0 t0 rx1 tx1 si1 bu1 t1 fu0 fs0 fu1 fs1 kd0 wd0 kd1 wd1 fp0 fp1
  read -r kd0 wd0 fp0 < <(ferry_losses)
  rx0=$(sink_rx); tx0=$(client_tx); si0=$(softirq_ticks); bu0=$(busy_ticks)
  read -r fu0 fs0 < <(proc_ticks "$ferry_pid"); t0=$(date +%s.%N)
  # The generator at the same priority in every run, so other load cannot starve it either.
  in_ns "$gen_ns" nice -n -15 timeout -s INT "$secs" trafgen --dev "$gen_dev" --conf "$work/t.cfg" \
    --cpus 1 >/dev/null 2>&1 || true
  t1=$(date +%s.%N)
  sleep 0.5
  rx1=$(sink_rx); tx1=$(client_tx); si1=$(softirq_ticks); bu1=$(busy_ticks)
  read -r fu1 fs1 < <(proc_ticks "$ferry_pid")
  read -r kd1 wd1 fp1 < <(ferry_losses)
  [ -n "$iphop_mode" ] && [ -n "$ferry_pid" ] && ferry_drop_reasons "$size" >>"$work/drops.tsv"
  if [ "$size" = icmp ]; then
    tr1=$(icmp_translated)
    printf '%s\t%s\n' "$kind" "$((tr1 - tr0))" >>"$work/translated.tsv"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$case" "$size" "$checksum" \
    "$((rx1 - rx0))" "$((tx1 - tx0))" "$(awk "BEGIN{print $t1 - $t0}")" "$((si1 - si0))" \
    "$((fu1 - fu0))" "$((fs1 - fs0))" "$((bu1 - bu0))" "$((kd1 - kd0))" "$((wd1 - wd0))" "$((fp1 - fp0))" \
    | tee -a "$results" >&2
}

# Before anything is attached to g0: "partial" frames must be byte for byte what the client's own
# stack sends (checksum field, length), captured on g0 side by side.
if [[ " $checksums " == *" partial "* ]]; then
  for size in $sizes; do
    for target in "$ROUTED 9" "$VIP $PORT"; do
      set -- $target
      traffic "$1" "$2" "$size" partial >"$work/check.cfg"
      python3 "$root/tests/bench/lab/check_partial.py" "$C" "$G" g0 c0 "$CLIENT_IP" "$1" "$2" "$size" "$work/check.cfg" >&2
    done
  done
fi

: >"$results"
load_before="$(cut -d" " -f1-3 /proc/loadavg)"
if [ -n "$affinity_mode" ]; then
  echo "kind	case	size	checksum	delivered	sent	seconds	softirq	ferryd_user	ferryd_sys	busy (ticks)	ferry_kernel_drops	ferry_worker_drops	ferry_finished_partial" >&2
  for size in $sizes; do
    for rep in $(seq "$repeats"); do
      for affinity in flow none; do
        write_config "$affinity"
        start_ferryd
        measure "ferry-$affinity" balance "$size" "$VIP" "$PORT"
        stop_ferryd
      done
    done
  done
  report_kinds "the UDP flow table's cost" "AFFINITY=1 tests/bench/lab/run.sh" \
    "ferry balance (one worker, pinned) with the bench service's \`affinity\` \`flow\` (the default: a lookup in the worker's flow table per request, 59,000 flows from cycling source ports, each seen several times a second at the offered rate, so the table holds them all) and \`none\` (pure Maglev, no table)." \
    ferry-none ferry-flow ferry-none
  echo "wrote $out" >&2
  exit 0
fi
if [ -n "$iphop_mode" ]; then
  checksums=full
  # The ICMP row's errors are counted where they arrive, at the client's veth.
  in_ns "$C" bpftool net attach xdpdrv pinned "$bpffs/prog/xdp_sink" dev c0
  : >"$work/translated.tsv"; : >"$work/drops.tsv"
  for rep in $(seq "$repeats"); do
    for size in ${IPHOP_CASES:-64 frag2008 icmp}; do
      nat_on "$([ "$size" = icmp ] && echo icmp)"
      measure kernel balance "$size" "$VIP" "$PORT"
      in_ns "$G" nft delete table ip ferrylab
      start_ferryd
      measure ferry balance "$size" "$VIP" "$PORT"
      stop_ferryd
    done
  done
  mkdir -p "$(dirname "$out")"
  python3 "$root/tests/bench/lab/report_iphop.py" "$results" "$hz" "$secs" "$load_before" "$repeats" "$work/translated.tsv" "$work/drops.tsv" >"$out"
  cat "$out"
  exit 0
fi
if [ -n "$quic_mode" ]; then
  [ -x "$build/tests/quic/ferry_quic_cid_encode" ] || { echo "run.sh: no $build/tests/quic/ferry_quic_cid_encode (make deps, then build)" >&2; exit 1; }
  : >"$work/quic.tsv"
  for size in $sizes; do
    for rep in $(seq "$repeats"); do
      for form in maglev plaintext single_pass four_pass; do
        quic_form "$form"
        start_ferryd
        measure "$form" balance "$size" "$VIP" "$PORT"
        ferry_stats 'print(sys.argv[1], total("ferry_xsk_quic_lb_routed_total"), total("ferry_xsk_quic_lb_fallback_total"))' "$form" >>"$work/quic.tsv"
        stop_ferryd
      done
    done
  done
  report_kinds "QUIC-LB routing next to the 4-tuple" "QUIC=1 tests/bench/lab/run.sh" \
    "ferry balance (one worker, pinned) of QUIC short-header packets (0x40, then the connection ID, then filler) whose connection IDs name the three backends' server IDs in turn: \`plaintext\` (2-byte server ID + 6-byte nonce), \`single_pass\` (3 + 13, AES-128-ECB), \`four_pass\` (2 + 6, the four-pass Feistel, three AES blocks), each with the service's \`quic_lb\` on, next to \`maglev\`: the same packets with \`quic_lb\` off (the 4-tuple: flow table, then Maglev). Full UDP checksums." \
    maglev maglev plaintext single_pass four_pass
  awk '{ r[$1] += $2; f[$1] += $3 } END { printf "\nRouted by connection ID / fell back, all rounds (`ferry_xsk_quic_lb_routed_total`, `ferry_xsk_quic_lb_fallback_total`, warm-ups included):"; for (k in r) printf " %s %d / %d;", k, r[k], f[k]; print "" }' "$work/quic.tsv" >>"$out"
  cat "$out"
  exit 0
fi
if [ -n "$dsr_mode" ]; then
  : >"$work/encap.tsv"
  for size in $sizes; do
    for rep in $(seq "$repeats"); do
      measure kernel-forward route "$size" "$ROUTED" 9
      nat_on
      measure kernel balance "$size" "$VIP" "$PORT"
      in_ns "$G" nft delete table ip ferrylab
      for forwarding in nat ipip gue; do
        write_config flow
        start_ferryd
        measure "$forwarding" balance "$size" "$VIP" "$PORT"
        ferry_stats 'print(sys.argv[1], total("ferry_xsk_encapsulated_packets_total"), total("ferry_xsk_drops_total"))' "$forwarding" >>"$work/encap.tsv"
        stop_ferryd
      done
      forwarding=nat
      in_ns "$G" bpftool net attach xdpdrv pinned "$bpffs/prog/xdp_redirect" dev g0
      measure xdp-redirect balance "$size" "$VIP" "$PORT"
      in_ns "$G" bpftool net detach xdpdrv dev g0
    done
  done
  report_kinds "direct server return next to NAT" "DSR=1 tests/bench/lab/run.sh" \
    "ferry balance (one worker, pinned) of UDP to the bench service with \`forwarding\` \`nat\` (the rewrite), \`ipip\` (IPv4-in-IPv4, 20 bytes more) and \`gue\` (GUE over IPv4, 28 bytes more) to the three backends on the 1600-byte-MTU backend side, next to \`kernel-forward\` (the kernel forwarding the same UDP to a routed address, no DNAT), \`kernel\` (nftables DNAT) and \`xdp-redirect\` (the in-kernel XDP redirect between the veths, no rewrite: the ceiling). Full UDP checksums." \
    nat kernel-forward kernel nat ipip gue xdp-redirect
  awk '{ e[$1] += $2; d[$1] += $3 } END { printf "\nEncapsulated / dropped by the worker, all rounds (`ferry_xsk_encapsulated_packets_total`, `ferry_xsk_drops_total`, warm-ups included):"; for (k in e) printf " %s %d / %d;", k, e[k], d[k]; print "" }' "$work/encap.tsv" >>"$out"
  cat "$out"
  exit 0
fi
if [ -n "$ferryd_b" ]; then
  ferryd_a="$ferryd"
  for size in $sizes; do
    for rep in $(seq "$repeats"); do
      for side in tree tree-no-hint other; do
        ferryd="$ferryd_a"; ferry_env=""
        [ "$side" = other ] && ferryd="$ferryd_b"
        [ "$side" = tree-no-hint ] && ferry_env="FERRY_XSK_IGNORE_XDP_MATCH=1"
        start_ferryd
        measure "$side" balance "$size" "$VIP" "$PORT"
        stop_ferryd
      done
    done
  done
  report_kinds "this tree's ferryd next to another build's, balance" \
    "FERRYD_B=$ferryd_b tests/bench/lab/run.sh" \
    "\`tree-no-hint\`: this tree with FERRY_XSK_IGNORE_XDP_MATCH=1; \`other\`: $ferryd_b." \
    other tree tree-no-hint other
  cat "$out"
  exit 0
fi
echo "kind	case	size	checksum	delivered	sent	seconds	softirq	ferryd_user	ferryd_sys	busy (ticks)	ferry_kernel_drops	ferry_worker_drops	ferry_finished_partial" >&2
for size in $sizes; do
  # (a) kernel: plain forwarding, then nftables DNAT for balance
  measure kernel route "$size" "$ROUTED" 9
  nat_on
  measure kernel balance "$size" "$VIP" "$PORT"
  in_ns "$G" nft delete table ip ferrylab

  # ferry: AF_XDP workers
  start_ferryd
  measure ferry route "$size" "$ROUTED" 9
  measure ferry balance "$size" "$VIP" "$PORT"
  stop_ferryd

  # (b) in-kernel XDP redirect (no DNAT: the ceiling for both)
  in_ns "$G" bpftool net attach xdpdrv pinned "$bpffs/prog/xdp_redirect" dev g0
  measure xdp-redirect route "$size" "$ROUTED" 9
  measure xdp-redirect balance "$size" "$VIP" "$PORT"
  in_ns "$G" bpftool net detach xdpdrv dev g0
done

mkdir -p "$(dirname "$out")"
python3 "$root/tests/bench/lab/report_lab.py" "$results" "$hz" "$secs" "$load_before" >"$out"
cat "$out"
