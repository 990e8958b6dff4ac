#!/usr/bin/env python3
"""The demo's closing summary, one screen: what the client got back from which backend (UDP
datagrams and TCP responses), what ferry counted (XDP verdicts, fast-path drops by reason, bytes
proxied, connections refused or failed).

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
    verdicts = by_label(stats, "ferry_xdp_packets_total", "action")
    print("XDP program: " + ", ".join(f"{action} {n:,}" for action, n in sorted(verdicts.items()) if n)
          + " (frames)")
    drops = {r: n for r, n in by_label(stats, "ferry_xsk_drops_total", "reason").items() if n}
    print("fast-path drops: " + (", ".join(f"{r} {n:,}" for r, n in sorted(drops.items())) or "none"))
    table("bytes proxied, backend -> client:",
          sorted(by_label(stats, "ferry_proxy_backend_bytes_out_total", "backend").items()))
    refused = sum(by_label(stats, "ferry_proxy_connections_refused_total", "service").values())
    failed = sum(by_label(stats, "ferry_proxy_connections_failed_total", "service").values())
    print(f"proxy connections refused {refused:,}, failed {failed:,}")

if __name__ == "__main__":
    main()
