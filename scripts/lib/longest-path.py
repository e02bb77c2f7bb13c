#!/usr/bin/env python3
"""The longest register-to-register path of a netlist Yosys mapped to Xilinx
cells (`synth_xilinx -flatten`, then `write_json`), counted in logic levels
as Xilinx's own report_failfast counts them (XilinxTclStore,
tclapp/xilinx/designutils/report_failfast.tcl): the LUTs on the path, plus
one if it starts at anything but a flip-flop, plus one if it ends anywhere
but a flip-flop's D. Carries (CARRY4/CARRY8), wide multiplexers (MUXF7/8/9)
and DSP slices on the path are named beside it, not counted, as the script
does not count them.

Yosys's own `ltp -noff` cannot do this after synth_xilinx: it excludes only
Yosys's internal flip-flop cells, so its paths run through FDRE cells, clock
buffers, block RAMs and DSPs with their registers. Here:
  - flip-flops (FD*), shift registers' and distributed RAMs' writes, block
    and Ultra RAM (a synchronous read) and DSP slices with any register in
    use are where paths start (their outputs) and end (their inputs);
  - a distributed RAM's or a shift register's read address to its output is
    a LUT level (a LUTRAM read is a LUT);
  - a DSP slice with no register in use is passed through;
  - clock pins end nothing.

Usage: longest-path.py NETLIST.json [--top N] [--json | --tsv]
Prints the longest path's levels and cells; --top N lists the N worst
endpoints; --json prints one JSON object; --tsv one line: the levels, what
is on the path, and where it runs from and to (scripts/synth-rtl's).
"""

import argparse
import json
import sys
from collections import defaultdict

# INV is Yosys's inverter cell, which Vivado maps into a LUT1 or absorbs.
LUTS = {f"LUT{i}" for i in range(1, 7)} | {"INV"}
MUXES = {"MUXF7", "MUXF8", "MUXF9"}
CARRIES = {"CARRY4", "CARRY8"}
DSPS = {"DSP48E1", "DSP48E2"}
BRAMS = {"RAMB18E1", "RAMB36E1", "RAMB18E2", "RAMB36E2", "URAM288", "URAM288_BASE"}
# Distributed RAM and shift registers: read address -> output is a LUT.
LUTRAM_READ = {
    "RAM32X1S": ["A0", "A1", "A2", "A3", "A4"],
    "RAM64X1S": ["A0", "A1", "A2", "A3", "A4", "A5"],
    "RAM32X1D": ["A0", "A1", "A2", "A3", "A4", "DPRA0", "DPRA1", "DPRA2", "DPRA3", "DPRA4"],
    "RAM64X1D": ["A0", "A1", "A2", "A3", "A4", "A5", "DPRA0", "DPRA1", "DPRA2", "DPRA3",
                 "DPRA4", "DPRA5"],
    "RAM128X1D": ["A", "DPRA"],
    "RAM32M": ["ADDRA", "ADDRB", "ADDRC", "ADDRD"],
    "RAM64M": ["ADDRA", "ADDRB", "ADDRC", "ADDRD"],
    "RAM32M16": ["ADDRA", "ADDRB", "ADDRC", "ADDRD", "ADDRE", "ADDRF", "ADDRG", "ADDRH"],
    "RAM64M8": ["ADDRA", "ADDRB", "ADDRC", "ADDRD", "ADDRE", "ADDRF", "ADDRG", "ADDRH"],
    "SRL16E": ["A0", "A1", "A2", "A3"],
    "SRLC16E": ["A0", "A1", "A2", "A3"],
    "SRLC32E": ["A"],
}
CLOCK_PINS = {"C", "CLK", "CLKARDCLK", "CLKBWRCLK", "WCLK"}
IGNORED = {"BUFG", "BUFGCTRL", "BUFG_GT", "IBUF", "OBUF", "VCC", "GND"}


def dsp_registered(cell):
    p = cell.get("parameters", {})
    for name in ("AREG", "BREG", "ACASCREG", "BCASCREG", "MREG", "PREG", "CREG", "ADREG", "DREG"):
        v = p.get(name)
        if v is not None and int(str(v), 2 if set(str(v)) <= {"0", "1"} else 10) != 0:
            return True
    return False


def kind(cell):
    """'comb' (a path goes through), 'seq' (paths end and start here),
    'lutram' (read address -> data is a LUT; the rest is a register), or
    None (not timing: clock buffers, constants)."""
    t = cell["type"]
    if t in LUTS or t in MUXES or t in CARRIES:
        return "comb"
    if t in DSPS:
        return "seq" if dsp_registered(cell) else "comb"
    if t in LUTRAM_READ:
        return "lutram"
    if t in IGNORED:
        return None
    return "seq"  # FD*, block RAM, URAM, anything else with a clock


# Cells Yosys writes without port directions.
KNOWN_DIRS = {"INV": {"I": "input", "O": "output"}}


def analyse(module):
    cells = module["cells"]
    for cell in cells.values():
        if not cell.get("port_directions") and cell["type"] in KNOWN_DIRS:
            cell["port_directions"] = KNOWN_DIRS[cell["type"]]
    missing = sorted({c["type"] for c in cells.values() if not c.get("port_directions")})
    if missing:
        sys.exit(f"longest-path: no port directions for cells of type {', '.join(missing)}")
    # Which cell drives each bit, and which cells read it.
    driver = {}
    readers = defaultdict(list)
    for name, cell in cells.items():
        dirs = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            for b in bits:
                if not isinstance(b, int):
                    continue
                if dirs.get(port) == "output":
                    driver[b] = (name, port)
                elif dirs.get(port) == "input":
                    readers[b].append((name, port))

    # Nodes are cells on a path (combinational, or a LUTRAM's read); a
    # path's value at a cell is the worst (levels, cells) of any path ending
    # at its output.
    memo = {}
    sys.setrecursionlimit(1_000_000)

    def start_of(bit):
        """(levels, path) of the worst path to `bit`, from where it starts."""
        d = driver.get(bit)
        if d is None:
            return (0, [])  # a top-level input or a constant: a start, as an FD
        name, port = d
        cell = cells[name]
        k = kind(cell)
        if k == "seq" or k is None:
            extra = 0 if cell["type"].startswith("FD") or k is None else 1
            return (extra, [(name, cell["type"], "start")])
        if k == "lutram":
            if port not in ("O", "SPO", "DPO", "Q", "Q31", "DOA", "DOB", "DOC", "DOD",
                            "DOE", "DOF", "DOG", "DOH"):
                return (1, [(name, cell["type"], "start")])
            ins = LUTRAM_READ[cell["type"]]
            return through(name, cell, ins, 1)
        return through(name, cell, None, 1 if cell["type"] in LUTS else 0)

    def through(name, cell, only, weight):
        key = name
        if key in memo:
            lv, path = memo[key]
            return lv, path
        memo[key] = (0, [])  # a combinational loop would stop here
        best = (0, [])
        dirs = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            if dirs.get(port) != "input" or port in CLOCK_PINS:
                continue
            if only is not None and port not in only:
                continue
            for b in bits:
                if not isinstance(b, int):
                    continue
                lv, path = start_of(b)
                if lv > best[0] or (lv == best[0] and len(path) > len(best[1])):
                    best = (lv, path)
        result = (best[0] + weight, best[1] + [(name, cell["type"], "via")])
        memo[key] = result
        return result

    ends = []
    for name, cell in cells.items():
        k = kind(cell)
        if k not in ("seq", "lutram"):
            continue
        dirs = cell.get("port_directions", {})
        fd = cell["type"].startswith("FD")
        for port, bits in cell["connections"].items():
            if dirs.get(port) != "input" or port in CLOCK_PINS:
                continue
            if k == "lutram" and port in LUTRAM_READ[cell["type"]]:
                continue  # the read goes through; see start_of
            for b in bits:
                if not isinstance(b, int):
                    continue
                lv, path = start_of(b)
                end_extra = 0 if fd and port == "D" else 1
                ends.append((lv + end_extra, path + [(name, cell["type"], "end:" + port)]))
    ends.sort(key=lambda e: (-e[0], -len(e[1])))
    return ends


def where(cells, name):
    """The RTL lines a cell came from: its `src` chain (the always block and
    the instances it sits in, as Yosys keeps them through flattening), the
    design's own files only, not Yosys's cell library."""
    src = cells.get(name, {}).get("attributes", {}).get("src", "")
    lines = []
    for p in src.split("|"):
        if not p or "share/yosys" in p:
            continue
        f, _, pos = p.rpartition(":")
        lines.append(f"{f.rsplit('/', 1)[-1]}:{pos.split('.')[0]}")
    return "+".join(lines) or name


def describe(path):
    counts = defaultdict(int)
    for _, t, role in path:
        if role == "via":
            if t in LUTS:
                counts["LUT"] += 1
            elif t in MUXES:
                counts["MUXF"] += 1
            elif t in CARRIES:
                counts["CARRY"] += 1
            elif t in DSPS:
                counts["DSP"] += 1
            else:
                counts[t] += 1
    return dict(counts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("netlist")
    ap.add_argument("--top", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tsv", action="store_true")
    a = ap.parse_args()
    with open(a.netlist) as f:
        data = json.load(f)
    tops = [m for m in data["modules"].values()
            if str(m.get("attributes", {}).get("top", "0")).strip("0") != ""]
    if not tops:
        tops = [max(data["modules"].values(), key=lambda m: len(m.get("cells", {})))]
    ends = analyse(tops[0])
    if not ends:
        print("0\tno register-to-register path\t-" if a.tsv else "no register-to-register path")
        return
    worst = ends[0]
    if a.tsv:
        c = describe(worst[1])
        on = ", ".join(f"{v} {k}" for k, v in sorted(c.items())) or "no logic"
        cells = tops[0]["cells"]
        print(f"{worst[0]}\t{on}\t{worst[1][0][1]} {where(cells, worst[1][0][0])}"
              f" -> {worst[1][-1][1]} {where(cells, worst[1][-1][0])}")
        return
    if a.json:
        print(json.dumps({
            "levels": worst[0],
            "cells": describe(worst[1]),
            "start": worst[1][0][0],
            "start_type": worst[1][0][1],
            "end": worst[1][-1][0],
            "end_type": worst[1][-1][1],
            "path": [{"cell": n, "type": t, "role": r} for n, t, r in worst[1]],
        }))
        return
    seen = set()
    shown = 0
    for lv, path in ends:
        end = path[-1][0]
        if end in seen:
            continue
        seen.add(end)
        c = describe(path)
        print(f"{lv} levels ({', '.join(f'{v} {k}' for k, v in sorted(c.items())) or 'no logic'}):"
              f" {path[0][1]} {path[0][0]} -> {path[-1][1]} {path[-1][0]}")
        if shown == 0:
            for n, t, r in path:
                print(f"    {r:10} {t:10} {n}")
        shown += 1
        if shown >= a.top:
            break


if __name__ == "__main__":
    main()
