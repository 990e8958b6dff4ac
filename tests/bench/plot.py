#!/usr/bin/python3
"""The figures of docs/benchmarks.md, drawn from the committed result files in
tests/bench/results/ (never from numbers typed here): rerun a benchmark, then this script.

    tests/bench/plot.py [RESULTS_DIR] [OUT_DIR]   (defaults: tests/bench/results docs/img)

Needs Debian's python3-matplotlib, hence /usr/bin/python3 (not a python3 earlier on PATH)."""
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "../.."))


def number(cell):
    cell = cell.strip().replace(",", "").rstrip("%")
    try:
        return float(cell)
    except ValueError:
        return None


def md_tables(text):
    """[(header cells, [row cells])] of every markdown table in `text`, in order."""
    tables, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-:| ]+\|$", lines[i + 1]):
            header = [c.strip() for c in lines[i].strip("|").split("|")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip("|").split("|")])
                i += 1
            tables.append((header, rows))
        else:
            i += 1
    return tables


def raw_table_with(text, *columns):
    """(header, rows as cell lists) of the first table having every one of `columns`."""
    for header, rows in md_tables(text):
        if all(c in header for c in columns):
            return header, rows
    raise SystemExit(f"no table with columns {columns}")


def table_with(text, *columns):
    header, rows = raw_table_with(text, *columns)
    return [dict(zip(header, r)) for r in rows]


def read(results, name):
    with open(os.path.join(results, name)) as f:
        return f.read()


def grouped_bars(ax, groups, series, values, ylabel):
    width = 0.8 / len(series)
    for k, s in enumerate(series):
        xs = [g + (k - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ys = [values.get((group, s)) or 0 for group in groups]
        bars = ax.bar(xs, ys, width, label=s)
        ax.bar_label(bars, fmt="%.2f" if max(ys, default=0) < 100 else "%.0f", fontsize=7)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)


def save(fig, out, name):
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)


def plot_proxy(results, out):
    header, cells = raw_table_with(read(results, "proxy.md"), "W", "proxy", "idle RSS B/conn")
    rows = [dict(zip(header, r)) for r in cells]
    proxies = [p for p in dict.fromkeys(r["proxy"] for r in rows) if p != "direct"]
    # Two columns are both named "GiB per CPU s": the one after each Gbps column.
    gib_columns = [i + 1 for i, h in enumerate(header) if h.endswith("Gbps") and "64 KiB" in h]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, conns, col in zip(axes, ("64", "256"), gib_columns):
        values = {(f"W={r[0]}", r[1]): number(r[col]) for r in cells}
        groups = [f"W={w}" for w in dict.fromkeys(r["W"] for r in rows)]
        grouped_bars(ax, groups, proxies, values, "GiB proxied per proxy CPU second")
        ax.set_title(f"64 KiB responses, {conns} connections (higher is better)")
    save(fig, out, "proxy-gib-per-cpu.png")

    fig, ax = plt.subplots(figsize=(6, 3.5))
    idle = [(r["proxy"], number(r["idle RSS B/conn"])) for r in rows
            if number(r["idle RSS B/conn"]) is not None]
    bars = ax.bar([p for p, _ in idle], [v for _, v in idle], color=["C0", "C1", "C2", "C3"][:len(idle)])
    ax.bar_label(bars, fmt="%.0f")
    ax.axhline(4096, color="grey", linestyle="--", linewidth=1)
    ax.text(len(idle) - 0.5, 4096, " 4 KiB target", va="bottom", ha="right", fontsize=8)
    ax.set_ylabel("RSS bytes per idle proxied connection")
    ax.set_title("Idle proxied connections (lower is better)")
    save(fig, out, "proxy-idle-rss.png")


def plot_streams(results, out):
    text = read(results, "streams.md")
    workers = re.findall(r"^## W = (\d+)$", text, re.M)
    tables = [(h, rows) for h, rows in md_tables(text) if "shape" in h and "Gbit per CPU s" in h]
    if not workers or len(tables) != len(workers):
        raise SystemExit("streams.md: one table per `## W = N` section expected")
    fig, axes = plt.subplots(1, len(workers), figsize=(5.5 * len(workers), 4), squeeze=False)
    for ax, w, (header, cells) in zip(axes[0], workers, tables):
        rows = [dict(zip(header, r)) for r in cells]
        shapes = list(dict.fromkeys(r["shape"] for r in rows))
        proxies = list(dict.fromkeys(r["proxy"] for r in rows))
        values = {(r["shape"], r["proxy"]): number(r["Gbit per CPU s"]) for r in rows}
        grouped_bars(ax, shapes, proxies, values, "Gbit per proxy CPU second")
        ax.set_title(f"iperf3 streams, W={w} (higher is better)")
    save(fig, out, "proxy-streams.png")


def plot_xsk_scaling(results, out):
    text = read(results, "xsk-scaling.txt")
    workers, aggregate, per_cpu = [], [], []
    for line in text.splitlines():
        cells = line.split()
        if len(cells) >= 4 and not line.startswith("#") and cells[0].isdigit():
            workers.append(int(cells[0]))
            aggregate.append(float(cells[1]))
            per_cpu.append(float(cells[3]))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(workers, aggregate, marker="o", label="aggregate (wall clock)")
    ax.plot(workers, per_cpu, marker="s", label="per CPU second")
    ax.axvline(2, color="grey", linestyle=":", linewidth=1)
    ax.text(2.1, min(aggregate), "2 CPUs", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(workers, [str(w) for w in workers])
    ax.set_xlabel("workers (one UMEM slab each)")
    ax.set_ylabel("Mpps, 0 drops, FIFO checked")
    ax.set_title("AF_XDP rings: multi-slab scaling")
    ax.legend(fontsize=8)
    save(fig, out, "xsk-scaling.png")


def plot_lab(results, out):
    rows = table_with(read(results, "lab.md"), "size", "case", "forwarder", "delivered pps")

    def group(r):  # results since the checksum dimension have a `checksum` column
        return f"{r['size']} B {r['case']}" + (f"\n{r['checksum']}" if "checksum" in r else "")
    groups = list(dict.fromkeys(group(r) for r in rows))
    forwarders = list(dict.fromkeys(r["forwarder"] for r in rows))
    values = {(group(r), r["forwarder"]): number(r["delivered pps"]) / 1e3 for r in rows}
    fig, ax = plt.subplots(figsize=(8 if len(groups) <= 4 else 11, 3.8))
    grouped_bars(ax, groups, forwarders, values, "delivered kpps")
    ax.set_title("netns lab: ferry vs kernel forwarding / nft DNAT vs in-kernel XDP redirect")
    save(fig, out, "lab-pps.png")


def plot_large(results, out):
    rows = table_with(read(results, "large.md"), "receive path", "connections", "Gbps", "ENOBUFS")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    def label(r):
        return f"{r['receive path']}, {r['consumer']}, cap {r['cap']}, {r['ring per worker']}"

    labels = list(dict.fromkeys(label(r) for r in rows))
    for ax, col, title in ((axes[0], "Gbps", "Gbps (higher is better)"),
                           (axes[1], "ENOBUFS", "ENOBUFS events (lower is better)")):
        values = {(f"{r['connections']} conns", label(r)): number(r[col]) for r in rows}
        groups = list(dict.fromkeys(f"{r['connections']} conns" for r in rows))
        grouped_bars(ax, groups, labels, values, col)
        ax.set_title(f"64 KiB responses: {title}")
        ax.legend(fontsize=6)
    save(fig, out, "uring-large.png")


def plot_echo(results, out):
    rows = table_with(read(results, "echo.md"), "mode", "W", "rt/s")
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for mode in dict.fromkeys(r["mode"] for r in rows):
        pts = [(int(r["W"]), number(r["rt/s"]) / 1e3) for r in rows if r["mode"] == mode]
        ax.plot([w for w, _ in pts], [v for _, v in pts], marker="o", label=mode)
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 2, 4, 8], ["1", "2", "4", "8"])
    ax.set_xlabel("workers W (2 CPUs: W > 2 oversubscribes)")
    ax.set_ylabel("k round trips/s")
    ax.set_title("Echo 1024 connections x 1000 rounds")
    ax.legend(fontsize=7)
    save(fig, out, "runtime-echo.png")


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/bench/results")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "docs/img")
    os.makedirs(out, exist_ok=True)
    for plot in (plot_proxy, plot_streams, plot_xsk_scaling, plot_lab, plot_large, plot_echo):
        plot(results, out)
    print("\n".join(sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".png"))))


if __name__ == "__main__":
    main()
