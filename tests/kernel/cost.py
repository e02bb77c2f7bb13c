#!/usr/bin/env python3
"""The kernel's share of a keystroke on the Zynq-7000 (scripts/arm-cost
--kernel): boots the real-kernel rig's image under qemu-system-arm with
scripts/lib/qemu-split.c, which counts the guest's instructions at kernel
addresses and below them apart, and asks it for both sums between phases.

Each round is a loaded phase and an idle one as long:
  A: keystrokes from this machine (arm-cost's client), one at a time on
     each of its keep-alive connections, through QEMU's user-mode network;
  B: nothing sent.
One connection is the sequential case arm-cost counts in user space; with
several, one wake-up of the daemon serves several keystrokes, as it does on
a busy board.
Per keystroke, the kernel's instructions are A's less the idle work the
device side (fabric-sim, polling the PL's registers: on a board the PL
itself) causes: its wake-ups are counted in both phases (its voluntary
context switches), and B's kernel instructions, all put down to its
wake-ups, price one. What is left is the kernel's work for the daemon:
the network driver and TCP, epoll, reads and writes, clock reads (system
calls on an A9, which has no generic timer for the vDSO), the UIO
interrupt, scheduling. The user-space sum is the daemon's, the device
side's and BusyBox's together; arm-cost counts the daemon's alone under
qemu-user.

Prints one JSON object.
"""

import argparse
import gzip
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rig  # noqa: E402


def counts(sock_path):
    """(user, kernel) instructions so far."""
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sock_path)
        line = s.makefile().readline()
    user, kernel = (int(x) for x in line.split())
    return user, kernel


def wakeups(board, pid):
    """The device side's voluntary context switches, over its threads: one
    a sleep."""
    status = board.sh(f"cat /proc/{pid}/task/*/status")[1]
    found = re.findall(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M)
    if not found:
        raise rig.Failed(f"no voluntary_ctxt_switches for {pid}: {status[-300:]!r}")
    return sum(int(n) for n in found)


def cpu_times(board):
    """(busy, all) clock ticks of the guest's CPU so far, from /proc/stat."""
    fields = [int(x) for x in board.sh("head -n 1 /proc/stat")[1].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def overlay_initrd(initrd, out, sim_args):
    """The image's initramfs with /etc/rig/fabric-sim.args replaced: a
    second newc archive after the first, whose files the kernel unpacks
    over the first's."""
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "etc/rig"))
        with open(os.path.join(d, "etc/rig/fabric-sim.args"), "w") as f:
            f.write(sim_args + "\n")
        archive = subprocess.run(
            ["cpio", "-o", "-H", "newc", "--quiet"],
            input=b"etc\netc/rig\netc/rig/fabric-sim.args\n",
            cwd=d, capture_output=True, check=True,
        ).stdout
    path = os.path.join(out, "initramfs-cost.cpio.gz")
    with open(initrd, "rb") as src, open(path, "wb") as dst:
        dst.write(src.read())
        dst.write(gzip.compress(archive, 1))
    return path


def main():
    ap = argparse.ArgumentParser()
    for a in ["--out", "--kernel", "--dtb", "--initrd", "--sd", "--plugin", "--client"]:
        ap.add_argument(a, required=True)
    ap.add_argument("--port", type=int, default=18090)
    ap.add_argument("--keystrokes", type=int, default=2000)
    ap.add_argument("--connections", default="1,1,16",
                    help="a round for each: the connections typing at once")
    ap.add_argument("--poll-us", type=int, default=1000,
                    help="the device side's poll: its wake-ups are the idle work subtracted")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sim_args = f"--full-reconfig-secs 1 --part xc7z020clg484-1 --poll-us {args.poll_us}"
    args.initrd = overlay_initrd(args.initrd, args.out, sim_args)
    sock = os.path.join(args.out, "split.sock")
    board = rig.Board(args, 1, ["-plugin", f"{args.plugin},sock={sock}"])
    result = {"keystrokes": args.keystrokes, "poll_us": args.poll_us, "rounds": []}
    try:
        board.expect(r"rig: up", timeout=600)
        board.wait_ready(timeout=600)
        rig.quiet(board)
        sim = board.sh("pidof fabric-sim")[1].split()
        if len(sim) != 1:
            raise rig.Failed(f"one fabric-sim expected, found {sim}")
        sim = sim[0]
        # Warm-up: the daemon's first requests (its tables grown, its pages
        # in), seeded completions the cache answers after the first.
        subprocess.run([sys.executable, args.client, str(args.port), "completion", "20"],
                       check=True, capture_output=True)
        # Each round types its own laps, 64 on from the round before's, and
        # so its own sessions. A lap starts at word 7 x its number, modulo
        # Genesis 1:1-3's 50, so the default rounds' laps (9, 9 and 16)
        # start at words no earlier round's did; only the short prefixes
        # two starting words share come again, which the cache answers
        # (its count is in the answers).
        for r, conns in enumerate(int(c) for c in args.connections.split(",")):
            a = counts(sock)
            w0 = wakeups(board, sim)
            cpu0 = cpu_times(board)
            t0 = time.monotonic()
            answers = subprocess.run(
                [sys.executable, args.client, str(args.port), "keystroke",
                 str(args.keystrokes), str(r * 64), str(conns)],
                check=True, capture_output=True, text=True,
            ).stdout.strip()
            t1 = time.monotonic()
            b = counts(sock)
            w1 = wakeups(board, sim)
            cpu1 = cpu_times(board)
            time.sleep(t1 - t0)
            c = counts(sock)
            w2 = wakeups(board, sim)
            load = {"user": b[0] - a[0], "kernel": b[1] - a[1], "wakeups": w1 - w0,
                    "seconds": round(t1 - t0, 2),
                    # How busy the guest's one CPU was, in its own time.
                    "busy": round((cpu1[0] - cpu0[0]) / max(cpu1[1] - cpu0[1], 1), 2)}
            idle = {"user": c[0] - b[0], "kernel": c[1] - b[1], "wakeups": w2 - w1,
                    "seconds": round(t1 - t0, 2)}
            per_wake = idle["kernel"] / max(idle["wakeups"], 1)
            kernel = (load["kernel"] - load["wakeups"] * per_wake) / args.keystrokes
            user = (load["user"] - idle["user"] * load["wakeups"] / max(idle["wakeups"], 1)) \
                / args.keystrokes
            result["rounds"].append({
                "connections": conns, "answers": answers, "load": load, "idle": idle,
                "kernel_per_wakeup": round(per_wake),
                "kernel_per_keystroke": round(kernel),
                "kernel_per_keystroke_uncorrected": round(
                    (load["kernel"] - idle["kernel"]) / args.keystrokes),
                "user_per_keystroke_all_processes": round(user),
            })
            print(f"cost: round {r + 1}: {result['rounds'][-1]}", file=sys.stderr, flush=True)
        board.power_off()
        board = None
    finally:
        if board is not None:
            board.stop()
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
