#!/usr/bin/env python3
"""The real-kernel rig's flow: boots the image scripts/kernel-test built under
qemu-system-arm and checks the board path as a user would after flashing.

It talks to the board twice over: through its serial console (a shell, as
SSH would give) and over HTTP through QEMU's user-mode network, forwarded
on 127.0.0.1 only. Every step is timed; results.json and the console log
go to --out. Exit status 0 when every check passed.
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

CONSOLE_TIMEOUT = 120


class Failed(Exception):
    pass


class Board:
    """One boot of the image: QEMU, its console and its HTTP port."""

    def __init__(self, args, boot, qemu_extra=()):
        self.args = args
        self.port = args.port
        sock = os.path.join(args.out, "console.sock")
        if os.path.exists(sock):
            os.unlink(sock)
        self.log = open(os.path.join(args.out, f"console-boot{boot}.log"), "wb")
        cmdline = "console=ttyPS0,115200 mem=512M uio_pdrv_genirq.of_id=generic-uio"
        self.qemu = subprocess.Popen(
            [
                "qemu-system-arm", "-M", "xilinx-zynq-a9", "-m", "1280M",
                "-kernel", args.kernel, "-dtb", args.dtb, "-initrd", args.initrd,
                "-append", cmdline,
                "-drive", f"file={args.sd},format=raw,if=sd",
                "-nic", f"user,model=cadence_gem,hostfwd=tcp:127.0.0.1:{self.port}-:8080",
                # The Zed's console is its second UART.
                "-serial", "null", "-serial", f"unix:{sock},server=on,wait=on",
                "-display", "none", "-monitor", "none", "-no-reboot",
                *qemu_extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(args.out, f"qemu-boot{boot}.log"), "wb"),
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(sock)
                break
            except OSError:
                if time.monotonic() > deadline or self.qemu.poll() is not None:
                    self.qemu.kill()
                    self.qemu.wait()
                    qlog = os.path.join(args.out, f"qemu-boot{boot}.log")
                    with open(qlog, errors="replace") as f:
                        raise Failed(f"QEMU did not start: {f.read()[-600:]}")
                time.sleep(0.05)
        self.started = time.monotonic()
        self.buf = b""
        self.cond = threading.Condition()
        self.closed = False
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            with self.cond:
                if not data:
                    self.closed = True
                    self.cond.notify_all()
                    return
                self.log.write(data)
                self.log.flush()
                self.buf += data
                self.cond.notify_all()

    def expect(self, pattern, timeout=CONSOLE_TIMEOUT):
        """Waits for `pattern` in the console output and consumes up to it."""
        rx = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                m = rx.search(self.buf)
                if m:
                    self.buf = self.buf[m.end():]
                    return m
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    tail = self.buf[-400:].decode(errors="replace")
                    raise Failed(f"no {pattern!r} on the console within {timeout}s; last: {tail!r}")
                self.cond.wait(left)

    def sh(self, command, timeout=CONSOLE_TIMEOUT, check=True):
        """Runs `command` in the board's shell; returns (status, output)."""
        marker = f"@@{time.monotonic_ns()}@@"
        with self.cond:
            self.buf = b""
        self.sock.sendall(f"{command}; echo \"{marker[:2]}\"\"{marker[2:]}$?\"\n".encode())
        m = self.expect(re.escape(marker).encode() + rb"(\d+)\r?\n", timeout)
        out = m.string[: m.start()].decode(errors="replace").replace("\r", "")
        # The shell's prompt, printed before the command's own output.
        out = re.sub(r"^(?:[/~][^#\n]*# )+", "", out)
        status = int(m.group(1))
        if check and status != 0:
            raise Failed(f"`{command}` exited {status}: {out.strip()[-800:]}")
        return status, out

    def http(self, method, path, body=None, timeout=30):
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=json.dumps(body).encode() if body is not None else None,
            method=method,
            headers={"Content-Type": "application/json"} if body is not None else {},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def wait_ready(self, timeout=180):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                status, body = self.http("GET", "/readyz", timeout=5)
                if status == 200:
                    return
                last = f"{status} {body[:200]!r}"
            except (OSError, urllib.error.URLError) as e:
                last = str(e)
            time.sleep(0.5)
        raise Failed(f"/readyz never answered 200 within {timeout}s (last: {last})")

    def power_off(self):
        self.sock.sendall(b"poweroff\n")
        # The Zynq has no power-off: the kernel halts, and QEMU is stopped.
        self.expect(r"reboot: [^\r\n]*(halted|Power down)", timeout=120)
        self.stop()

    def stop(self):
        self.qemu.terminate()
        try:
            self.qemu.wait(10)
        except subprocess.TimeoutExpired:
            self.qemu.kill()
        self.sock.close()
        self.log.close()


class Flow:
    def __init__(self, args):
        self.args = args
        self.steps = []
        self.ok = True

    def step(self, name, fn):
        t = time.monotonic()
        try:
            detail = fn()
            ok = True
        except Failed as e:
            detail = str(e)
            ok = False
        seconds = round(time.monotonic() - t, 2)
        self.steps.append({"step": name, "ok": ok, "seconds": seconds, "detail": detail})
        print(f"{'PASS' if ok else 'FAIL'} {name} ({seconds} s): {detail}", flush=True)
        if not ok:
            self.ok = False
            raise Failed(name)
        return detail


def check_init_scripts(console):
    """The image's init scripts each said OK (the kernel's messages may land
    between a script's name and its word)."""
    for name in ["Preparing data", "Loading fabricd-shell", "Starting fabricd"]:
        m = re.search(rf"{name}: ((?:\[[^\]]*\][^\n]*\n|\r\n?)*)(\w+)", console)
        if not m or m.group(2) != "OK":
            raise Failed(f"{name}: {m.group(0) if m else 'never ran'}")


def quiet(board):
    """The console is the rig's shell from now on: no echo, and the kernel's
    messages only in dmesg (a printk can land inside a line of output)."""
    board.sh("stty -echo; dmesg -n 1")


def completions(board, model, n, seed0=0):
    """n completions from this machine; each must be a 200 with text."""
    lat = []
    for i in range(n):
        t = time.monotonic()
        status, body = board.http(
            "POST", "/v1/completions",
            {"model": model, "prompt": "And God said", "max_tokens": 8, "seed": seed0 + i},
        )
        lat.append(time.monotonic() - t)
        if status != 200:
            raise Failed(f"completion {i} from {model}: {status} {body[:300]!r}")
        text = json.loads(body)["choices"][0]["text"]
        if not text:
            raise Failed(f"completion {i} from {model}: empty text")
    lat.sort()
    return {"requests": n, "model": model, "p50_ms": round(lat[n // 2] * 1000, 1),
            "max_ms": round(lat[-1] * 1000, 1)}


def fabric_log(board):
    return board.sh("cat /var/log/fabric-sim.log")[1]


def probe(board):
    return board.sh("fabricd probe --root /")[1]


def load(board, model, slot, flow_name, extra="--reflash"):
    """A partial load (the engine's image, then the model's table) through
    configfs and the kernel's region code, checked from every side:
    fabricctl's answer, the live tree, what the device side was handed and
    which decoupler the kernel set, the shell's read-back."""
    before = fabric_log(board)
    _, out = board.sh(f"fabricctl --json load {model} --slot {slot} {extra}", timeout=300)
    report = json.loads(out[out.index("{"):])
    if not report.get("ok", True) and "error" in report:
        raise Failed(f"fabricctl: {report['error']}")
    method = report.get("data", {}).get("report", {}).get("method")
    if method != "partial":
        raise Failed(f"a {method} load, not a partial one: {report}")
    after = fabric_log(board)[len(before):]
    image = re.search(rf"image (\d+): partial, (\d+) bytes, engine [^(]*into slot {slot} \(decouplers (\[[^]]*\])\)", after)
    if not image:
        raise Failed(f"the device side was not handed a partial image for slot {slot}: {after!r}")
    if f"slot {slot} decoupled" not in after and "true" not in image.group(3):
        raise Failed(f"slot {slot}'s decoupler was never set: {after!r}")
    if f"slot {slot} coupled" not in after:
        raise Failed(f"slot {slot}'s decoupler was not released after the load: {after!r}")
    _, fw = board.sh(f"cat /proc/device-tree/fpga-full/fpga-region-slot{slot}/firmware-name")
    if f"fabricd/staged/slot{slot}.bin" not in fw:
        raise Failed(f"the live tree's region {slot} names {fw!r}")
    p = probe(board)
    if not re.search(rf"slot {slot}\s+ready\s+{model}\s", p):
        raise Failed(f"fabricd probe does not show {model} ready in slot {slot}: {p}")
    return {"model": model, "slot": slot, "image_bytes": int(image.group(2)),
            "decouplers_during_load": image.group(3), "report": report}


def switch_report(board, model, slot):
    """`fabricctl load` of a model whose engine the slot runs: its report,
    which must say it was a switch."""
    _, out = board.sh(f"fabricctl --json load {model} --slot {slot}", timeout=300)
    report = json.loads(out[out.index("{"):])
    r = report.get("data", {}).get("report", {})
    if r.get("method") != "switch":
        raise Failed(f"not a switch: {report}")
    return {k: r[k] for k in ("drain_ms", "table_ms", "total_ms")}


def switched(board, before, model, slot):
    """What switches since the device side's log read `before` must have
    done: handed it no image and moved no decoupler, and left `model`
    ready in `slot`."""
    after = fabric_log(board)[len(before):]
    if "image " in after or "decoupled" in after:
        raise Failed(f"a switch touched the configuration port or a decoupler: {after!r}")
    p = probe(board)
    if not re.search(rf"slot {slot}\s+ready\s+{model}\s", p):
        raise Failed(f"fabricd probe does not show {model} ready in slot {slot}: {p}")


def switch(board, model, slot):
    """A switch: the slot runs the model's engine, so the load commits the
    model's table alone; the device side is handed no image and no
    decoupler moves."""
    before = fabric_log(board)
    took = switch_report(board, model, slot)
    switched(board, before, model, slot)
    return took


def transformer(board, args):
    """kjv-lm into slot 1 by a partial load (the transformer's engine, then
    its weights committed), and completions of it over HTTP, each the text
    lmgen gives on this machine from the same weights (the integer
    definition): the same tokens through the real kernel's paths."""
    loaded = load(board, "kjv-lm", 1, "slot1")
    answers = []
    for prompt, temperature, seed in (("And God said", 0, 0), ("Blessed are the", 0.8, 7)):
        t = time.monotonic()
        status, body = board.http(
            "POST", "/v1/completions",
            {"model": "kjv-lm", "prompt": prompt, "max_tokens": 12,
             "temperature": temperature, "seed": seed},
            timeout=120)
        took = time.monotonic() - t
        if status != 200:
            raise Failed(f"kjv-lm: {status} {body[:300]!r}")
        text = json.loads(body)["choices"][0]["text"]
        want = subprocess.run(
            [args.lmgen, "--weights", f"{args.catalog}/kjv-lm.flm",
             "--tokenizer", f"{args.catalog}/kjv-lm.tok", "--prompt", prompt,
             "--max-tokens", "12", "--temperature", str(temperature), "--seed", str(seed)],
            check=True, capture_output=True, text=True).stdout
        if text != want:
            raise Failed(f"kjv-lm answered {text!r} to {prompt!r}; the definition gives {want!r}")
        answers.append({"prompt": prompt, "temperature": temperature, "text": text,
                        "ms": round(took * 1000, 1)})
    return {"image_bytes": loaded["image_bytes"], "answers": answers}


class Hammer:
    """Completions from slot 0's model (fortunes), one after another, from
    a thread of this machine until stopped: their latencies and any
    answer that is not a 200."""

    def __init__(self, board, seed0):
        self.board, self.seed = board, seed0
        self.lat, self.errors = [], []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self):
        while not self.stop.is_set():
            t = time.monotonic()
            status, body = self.board.http("POST", "/v1/completions", {
                "model": "fortunes", "prompt": "And God said", "max_tokens": 8,
                "seed": self.seed})
            self.lat.append(time.monotonic() - t)
            if status != 200:
                self.errors.append(f"{status} {body[:200]!r}")
            self.seed += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_):
        self.stop.set()
        self.thread.join()

    def summary(self):
        lat = sorted(self.lat)
        n = len(lat)
        return {"requests": n, "p50_ms": round(lat[n // 2] * 1000, 1),
                "p95_ms": round(lat[min(n - 1, n * 95 // 100)] * 1000, 1),
                "max_ms": round(lat[-1] * 1000, 1)}


def switches_under_load(board, rounds=4, quiet_s=5.0):
    """Slot 1 switched between kjv and fortunes `rounds` times while this
    machine asks slot 0's model (fortunes) for completions, beside the same
    completions for `quiet_s` seconds before with nothing switching: the
    other slot's latency. Only the loads run on the board while the
    switches are timed; what they did is checked after."""
    with Hammer(board, 500) as quiet:
        quiet.stop.wait(quiet_s)  # the quiet window's length; nothing sets it
    before = fabric_log(board)
    took = []
    with Hammer(board, 10_000) as during:
        for k in range(rounds):
            took.append(switch_report(board, "fortunes" if k % 2 == 0 else "kjv", 1))
    for h in (quiet, during):
        if h.errors:
            raise Failed(f"slot 0's completions: {h.errors[:3]}")
    switched(board, before, "fortunes" if rounds % 2 else "kjv", 1)
    if rounds % 2:
        switch(board, "kjv", 1)
    q, d = quiet.summary(), during.summary()
    return {"switches": took, "quiet": q, "during": d,
            "p95_during_over_quiet": round(d["p95_ms"] / q["p95_ms"], 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--dtb", required=True)
    ap.add_argument("--initrd", required=True)
    ap.add_argument("--sd", required=True)
    ap.add_argument("--port", type=int, default=18080)
    ap.add_argument("--kernel-build-seconds", type=int, default=0)
    ap.add_argument("--kernel-cached", type=int, default=0)
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--lmgen", required=True, help="this machine's lmgen, for the transformer's answers")
    args = ap.parse_args()

    flow = Flow(args)
    board = None
    logs = {}
    figures = {"kernel_build_seconds": args.kernel_build_seconds,
               "kernel_from_cache": bool(args.kernel_cached)}
    try:
        board = Board(args, 1)

        def boot():
            up = board.expect(r"rig: up", timeout=240)
            figures["boot_to_rcs_done_s"] = round(time.monotonic() - board.started, 2)
            check_init_scripts(up.string[: up.start()].decode(errors="replace"))
            board.wait_ready()
            figures["boot_to_ready_s"] = round(time.monotonic() - board.started, 2)
            quiet(board)
            return f"up in {figures['boot_to_ready_s']} s"
        flow.step("boot: S55 loads the shell, S60 starts fabricd, /readyz", boot)

        def check_probe():
            p = probe(board)
            for want in ["slot 0", "slot 1", "kjv", "buffer"]:
                if want not in p:
                    raise Failed(f"fabricd probe lacks {want!r}: {p}")
            return p.strip().splitlines()[0]
        flow.step("fabricd probe", check_probe)

        figures["first_requests"] = flow.step(
            "completions over HTTP", lambda: completions(board, "kjv", 20))
        figures["load_slot1"] = flow.step(
            "partial load of kjv into slot 1 (--reflash)", lambda: load(board, "kjv", 1, "slot1"))
        figures["load_slot0"] = flow.step(
            "partial load of fortunes into slot 0 (--reflash)",
            lambda: load(board, "fortunes", 0, "slot0"))
        flow.step("completions from both models", lambda: [
            completions(board, "fortunes", 10, 100), completions(board, "kjv", 10, 200)])
        figures["switches"] = flow.step(
            "switches of slot 1 between kjv and fortunes while slot 0 serves",
            lambda: switches_under_load(board))
        # The partial load again, its table checked before, as every switch's
        # was: a switch beside the same load by reconfiguration.
        figures["reload_slot1"] = flow.step(
            "partial load of kjv into slot 1 again, its table checked before (--reflash)",
            lambda: load(board, "kjv", 1, "slot1"))

        figures["transformer"] = flow.step(
            "partial load of kjv-lm (the transformer) into slot 1: its answers the definition's",
            lambda: transformer(board, args))
        figures["load_slot1_back"] = flow.step(
            "partial load of kjv into slot 1 again (--reflash)",
            lambda: load(board, "kjv", 1, "slot1"))

        def kill9():
            before = fabric_log(board)
            old = board.sh("pidof fabricd")[1].strip()
            board.sh(f"kill -9 {old}")
            t = time.monotonic()
            # Gone before /readyz is asked, or the dying one could answer.
            while board.sh("pidof fabricd", check=False)[1].strip() == old:
                if time.monotonic() - t > 30:
                    raise Failed(f"fabricd {old} outlived kill -9 by 30 s")
            board.wait_ready()
            took = round(time.monotonic() - t, 2)
            after = fabric_log(board)[len(before):]
            if "image " in after:
                raise Failed(f"the restart reflashed: {after!r}")
            p = probe(board)
            if not (re.search(r"slot 0\s.*fortunes", p) and re.search(r"slot 1\s.*kjv", p)):
                raise Failed(f"the restart lost the loaded models: {p}")
            completions(board, "fortunes", 5, 300)
            return {"restart_to_ready_s": took}
        figures["kill9"] = flow.step("kill -9 fabricd: the supervisor restarts it, no reflash", kill9)

        def full():
            before = fabric_log(board)
            t = time.monotonic()
            _, out = board.sh("fabricctl --json load kjv --full", timeout=600)
            answer = json.loads(out[out.index("{"):])
            report = answer["data"]["report"]
            if report["method"] != "full" or not report.get("restart"):
                raise Failed(f"not a full load that restarts the daemon: {answer}")
            after = fabric_log(board)[len(before):]
            image = re.search(r"image (\d+): full, (\d+) bytes, engine trigram v2 in every slot", after)
            if not image:
                raise Failed(f"the device side was not handed the full image: {after!r}")
            board.wait_ready()
            took = round(time.monotonic() - t, 2)
            p = probe(board)
            # The full image put the engine in both slots; the restarted
            # daemon committed kjv to slot 0 and what slot 1 held, kjv.
            if not re.search(r"slot 0\s+ready\s+kjv\s", p) or not re.search(r"slot 1\s+ready\s+kjv\s", p):
                raise Failed(f"after the full load: {p}")
            _, names = board.sh("cat /sys/kernel/config/device-tree/overlays/fabricd-shell/path")
            completions(board, "kjv", 5, 400)
            return {"load_to_ready_s": took, "image_bytes": int(image.group(2)),
                    "shell_overlay": names.strip().splitlines()[-1], "report": report}
        figures["full"] = flow.step("a full reconfiguration through the base region", full)

        def power_cycle():
            nonlocal board
            _, stats = board.http("GET", "/stats")
            served = json.loads(stats)
            logs.update(board_logs(board))
            board.power_off()
            board = Board(args, 2)
            up = board.expect(r"rig: up", timeout=240)
            check_init_scripts(up.string[: up.start()].decode(errors="replace"))
            board.wait_ready()
            quiet(board)
            _, keys = board.sh("cat /data/ssh/authorized_keys")
            if "kernel-test" not in keys:
                raise Failed(f"/data/ssh/authorized_keys lost: {keys!r}")
            # The tables were lost with the power; the daemon committed what
            # each slot last held (its plan on /data).
            p = probe(board)
            if not re.search(r"slot 0\s+ready\s+kjv\s", p) or not re.search(r"slot 1\s+ready\s+kjv\s", p):
                raise Failed(f"after the power cycle the slots do not hold what they held: {p}")
            _, stats = board.http("GET", "/stats")
            again = json.loads(stats)
            return {"stats_before": summary(served), "stats_after": summary(again)}
        figures["power_cycle"] = flow.step(
            "power off, boot again: /data kept, the slots given what they held", power_cycle)
        kept = figures["power_cycle"]
        if not 0 < kept["stats_before"]["requests"] <= kept["stats_after"]["requests"]:
            flow.ok = False
            print(f"FAIL the stats did not survive the power cycle: {kept}", flush=True)
    except Failed as e:
        flow.ok = False
        if not flow.steps or flow.steps[-1]["ok"]:
            print(f"FAIL {e}", flush=True)
    finally:
        if board is not None:
            # What the board said, for the report (the boot with the loads,
            # unless the flow got past it) and into the console log.
            if not logs:
                logs.update(board_logs(board))
            try:
                board.sh("cat /var/log/messages", timeout=60, check=False)
            except (Failed, OSError):
                pass
            board.stop()
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"ok": flow.ok, "steps": flow.steps, "figures": figures}, f, indent=2)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(report(args, flow, figures, logs))
    print(f"kernel-test: {'passed' if flow.ok else 'FAILED'}; {os.path.join(args.out, 'results.json')}")
    sys.exit(0 if flow.ok else 1)


def board_logs(board):
    """What the kernel and the device side said, for the report."""
    out = {}
    for name, cmd in [("uname", "uname -r"), ("dmesg", "dmesg"),
                      ("fabric-sim", "cat /var/log/fabric-sim.log"),
                      ("fabricd", "grep fabricd /var/log/messages")]:
        try:
            out[name] = board.sh(cmd, timeout=60, check=False)[1]
        except (Failed, OSError):
            out[name] = ""
    return out


def report(args, flow, figures, logs):
    """results.md: the steps, the figures, and the kernel's own words."""
    lines = [
        f"Kernel: Linux {logs.get('uname', '?').strip()} under "
        f"{subprocess.run(['qemu-system-arm', '--version'], capture_output=True, text=True).stdout.splitlines()[0]}, "
        f"machine xilinx-zynq-a9. Kernel build: {figures['kernel_build_seconds']} s"
        f"{' (taken from the cache this run)' if figures['kernel_from_cache'] else ' (this run)'}.",
        "",
        f"Result: **{'passed' if flow.ok else 'FAILED'}**.",
        "",
        "| step | result | seconds | what it showed |",
        "|---|---|---:|---|",
    ]
    for st in flow.steps:
        detail = st["detail"]
        if isinstance(detail, dict) and "report" in detail:
            r = detail["report"]
            r = r.get("data", {}).get("report", r)
            detail = {k: v for k, v in detail.items() if k != "report"}
            detail.update({k: r[k] for k in ("method", "drain_ms", "reconfigure_ms", "table_ms", "total_ms") if k in r})
        text = json.dumps(detail) if not isinstance(detail, str) else detail
        text = " ".join(text.split())
        lines.append(f"| {st['step']} | {'pass' if st['ok'] else 'FAIL'} | {st['seconds']} | {text.replace('|', '/')[:400]} |")
    lines += ["", "## What the kernel said about the FPGA, the overlays and UIO", "", "```"]
    lines += [l for l in logs.get("dmesg", "").splitlines()
              if re.search(r"fpga|overlay|region|uio|bridge", l, re.I)][:60]
    lines += ["```", "", "## What the device side (fabric-sim --kernel) saw", "", "```"]
    lines += logs.get("fabric-sim", "").splitlines()[:60]
    lines += ["```", ""]
    return "\n".join(lines)


def summary(stats):
    """Requests served over every window the stats report."""
    windows = stats.get("windows", [])
    total = 0
    for w in windows:
        for k, v in w.get("requests", {}).items() if isinstance(w.get("requests"), dict) else []:
            total += v
    return {"windows": len(windows), "requests": total}


if __name__ == "__main__":
    main()
