#!/usr/bin/env python3
"""Prints a Markdown table of a ladder run beside the appliance's figures.

Usage: beside-appliance.py LADDER.json SHED.json

For each of the appliance's client counts, the rung with the nearest
client count from each run, and the queueing ideal for that rung.
"""
import json
import sys


def nearest(rungs, clients):
    """The rung nearest in clients, if within a factor of 1.5."""
    r = min(rungs, key=lambda r: abs(r["clients"] - clients)) if rungs else None
    return r if r and max(r["clients"], clients) <= 1.5 * min(r["clients"], clients) else None


def t(ms):
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def cell(r):
    if r is None:
        return "-"
    return f'{r["clients"]}: {t(r["p50_ms"])} / {t(r["p95_ms"])} ({r["p95_over_p50"]:.2f})'


def main():
    full = json.load(open(sys.argv[1]))
    shed = json.load(open(sys.argv[2]))
    print("| appliance: clients, p50 / p95 (p95/p50) | fabricd, queue 4,096: rung, p50 / p95 (p95/p50) | queueing ideal p50 | fabricd, queue 256 |")
    print("|---|---|---:|---|")
    for a in full["appliance"]:
        ratio = a["p95_ms"] / a["p50_ms"]
        r = nearest(full["rungs"], a["clients"])
        s = nearest(shed["rungs"], a["clients"])
        ideal = t(r["ideal_p50_ms"]) if r else "-"
        print(f'| {a["clients"]}: {t(a["p50_ms"])} / {t(a["p95_ms"])} ({ratio:.2f}) | {cell(r)} | {ideal} | {cell(s)} |')


if __name__ == "__main__":
    main()
