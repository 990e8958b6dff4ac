#!/usr/bin/env python3
"""The demo's closing summary: what the client got back from which backend (UDP datagrams and TCP
responses), what ferry counted (XDP verdicts, fast-path drops by reason, bytes proxied).

    demo_summary.py CLIENT_JSON STATS_JSON      (STATS_JSON: `ferryctl --json stats ferry_`)
"""
import json
import sys


def series(stats, name):
    """[(labels, value)] of metric `name` in a `ferryctl --json stats` answer."""
    for family in stats.get("result", {}).get("metrics", []):
        if family.get("name") == name:
            return [(s.get("labels", {}), s.get("value", 0)) for s in family.get("samples", [])]
    return []


def by_label(stats, name, label):
    totals = {}
    for labels, value in series(stats, name):
        if isinstance(value, (int, float)):
            key = labels.get(label, "-")
            totals[key] = totals.get(key, 0) + value
    return totals


def table(title, rows):
    print(title)
    if not rows:
        print("  (none)")
        return
    width = max(len(str(k)) for k, _ in rows)
    for key, value in rows:
        print(f"  {str(key):<{width}}  {value:>12,}")


def main():
    client = json.load(open(sys.argv[1]))
    stats = json.load(open(sys.argv[2]))
    udp, tcp = client.get("udp", {}), client.get("tcp", {})

    print(f"UDP (AF_XDP, Maglev): {udp.get('sent', 0):,} requests sent, "
          f"{udp.get('received', 0):,} answers back")
    table("  answers per backend:", sorted(udp.get("per_backend", {}).items()))
    print(f"TCP (io_uring proxy): {tcp.get('connections', 0):,} connections, "
          f"{tcp.get('responses', 0):,} responses, {tcp.get('bytes', 0) / 2**20:,.1f} MiB, "
          f"{tcp.get('errors', 0)} errors" +
          (f" (last: {tcp['last_error']})" if tcp.get("last_error") else ""))
    table("  responses per backend:", sorted(tcp.get("per_backend", {}).items()))
    print()
    table("XDP verdicts (packets):",
          sorted(by_label(stats, "ferry_xdp_packets_total", "action").items()))
    table("fast-path drops by reason:",
          sorted(by_label(stats, "ferry_xsk_drops_total", "reason").items()))
    table("bytes proxied, client -> backend:",
          sorted(by_label(stats, "ferry_proxy_backend_bytes_in_total", "backend").items()))
    table("bytes proxied, backend -> client:",
          sorted(by_label(stats, "ferry_proxy_backend_bytes_out_total", "backend").items()))
    table("proxy connections refused / failed:",
          [("refused", sum(by_label(stats, "ferry_proxy_connections_refused_total", "service").values())),
           ("failed", sum(by_label(stats, "ferry_proxy_connections_failed_total", "service").values()))])


if __name__ == "__main__":
    main()
