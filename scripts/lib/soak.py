#!/usr/bin/env python3
"""scripts/soak's helpers (issue 32), run as `python3 soak.py COMMAND ...`:

  raw HOST:PORT DIR...   sends each file of the fuzz corpus's request heads
                         (as they are) and completion bodies (under a POST
                         head), and a few heads of its own, each on a
                         connection of its own; prints what each was
                         answered, as JSON
  control SOCKET         sends garbage to a control socket, a line a
                         connection; prints what each was answered, as JSON
  report WORK [...]      the soak's Markdown report from its work directory
"""

import argparse
import glob
import json
import os
import random
import socket
import sys

from soak_report import cmd_report

# ---------------------------------------------------------------- raw HTTP


def recv_until(s, marker, cap, got):
    """Adds what S sends to GOT (a bytearray, so that what came before a
    timeout is kept) until MARKER is in it, CAP bytes have come, or S
    closes."""
    while marker not in got and len(got) < cap:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk


def http_exchange(addr, data, wait=10.0):
    """The status and X-Fabricd-Error of the answer to DATA, or closed,
    reset, timeout, refused."""
    host, port = addr.rsplit(":", 1)
    try:
        s = socket.create_connection((host, int(port)), timeout=wait)
    except OSError:
        return {"status": "refused"}
    try:
        try:
            s.sendall(data)
        except OSError:
            pass
        # An answer within 3 s; else the input's end (a head cut short
        # waits for more), and the rest of WAIT for an answer or a close.
        got = bytearray()
        s.settimeout(3.0)
        try:
            recv_until(s, b"\r\n\r\n", 65536, got)
        except socket.timeout:
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            s.settimeout(wait - 3.0)
            recv_until(s, b"\r\n\r\n", 65536, got)
    except socket.timeout:
        return {"status": "timeout"}
    except ConnectionResetError:
        return {"status": "reset"}
    finally:
        s.close()
    if not got:
        return {"status": "closed"}
    head = got.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    parts = head[0].split()
    status = parts[1] if len(parts) > 1 else "garbled"
    typ = None
    for line in head[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "x-fabricd-error":
            typ = v.strip()
    return {"status": status, "type": typ}


def own_heads():
    body = b'{"model":"kjv","prompt":"x","max_tokens":2}'
    return {
        "own/garbage": bytes(random.Random(1).randrange(256) for _ in range(2048)),
        "own/nul-in-head": b"GET /healthz HTTP/1.1\r\nhost: a\x00b\r\n\r\n",
        "own/bad-method": b"BREW /v1/completions HTTP/1.1\r\nhost: x\r\n\r\n",
        "own/http2-preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        "own/long-header": b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-a: " + b"a" * 70000 + b"\r\n\r\n",
        "own/two-lengths": b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\ncontent-length: 44\r\n\r\n" + body,
        "own/short-body": b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 400\r\n\r\n" + body,
        "own/bad-chunk": b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        "own/json-bomb": b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 20000\r\n\r\n" + b"[" * 20000,
        "own/unknown-model": b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 46\r\n\r\n" + b'{"model":"nope","prompt":"x","max_tokens":2} ',
    }


def cmd_raw(args):
    out = {}
    for d in args.dirs:
        kind = os.path.basename(d.rstrip("/"))
        for f in sorted(glob.glob(os.path.join(d, "*"))):
            data = open(f, "rb").read()
            if kind == "completion_body":
                data = (
                    b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(data)}\r\nconnection: close\r\n\r\n".encode()
                    + data
                )
            out[f"{kind}/{os.path.basename(f)}"] = http_exchange(args.addr, data)
    for name, data in own_heads().items():
        out[name] = http_exchange(args.addr, data)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


# ---------------------------------------------------------------- control socket


def control_garbage():
    rnd = random.Random(7)
    return {
        "random-bytes": bytes(rnd.randrange(256) for _ in range(512)) + b"\n",
        "nul": b"\x00\x00\x00\n",
        "not-json": b"load everything now\n",
        "empty-object": b"{}\n",
        "array": b"[1,2,3]\n",
        "unknown-cmd": b'{"cmd":"self_destruct"}\n',
        "load-no-model": b'{"cmd":"load"}\n',
        "load-unknown-model": b'{"cmd":"load","model":"nope","slot":1}\n',
        "drain-no-such-slot": b'{"cmd":"drain","slot":99}\n',
        "stats-bad-since": b'{"cmd":"stats","since_ms":"yesterday"}\n',
        "answer-as-command": b'{"ok":true,"data":{"slots":[{"model":"kjv"}]}}\n',
        "deep-nesting": b"[" * 5000 + b"\n",
        "long-line": b'{"cmd":"' + b"x" * (1 << 20) + b'"}\n',
        "no-newline": b'{"cmd":"status"',
        "bad-utf8": b'{"cmd":"\xff\xfe"}\n',
    }


def control_exchange(path, data, wait=5.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(wait)
    try:
        s.connect(path)
    except OSError as e:
        return {"answer": "refused", "detail": str(e)}
    try:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        got = bytearray()
        recv_until(s, b"\n", 1 << 20, got)
    except socket.timeout:
        return {"answer": "timeout"}
    except ConnectionResetError:
        return {"answer": "reset"}
    finally:
        s.close()
    if not got:
        return {"answer": "closed"}
    try:
        v = json.loads(got.split(b"\n", 1)[0])
    except ValueError:
        return {"answer": "untyped", "detail": got[:200].decode("latin-1")}
    if isinstance(v, dict) and v.get("ok") is False and isinstance(v.get("error"), dict) and v["error"].get("type"):
        return {"answer": "typed", "type": v["error"]["type"]}
    if isinstance(v, dict) and v.get("ok") is True:
        return {"answer": "ok"}
    return {"answer": "untyped", "detail": got[:200].decode("latin-1")}


def cmd_control(args):
    out = {name: control_exchange(args.socket, data) for name, data in control_garbage().items()}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("raw")
    r.add_argument("addr")
    r.add_argument("dirs", nargs="*")
    c = sub.add_parser("control")
    c.add_argument("socket")
    rep = sub.add_parser("report")
    rep.add_argument("work")
    for k in ("date", "machine", "commit", "command", "haproxy", "time_scale", "fabric_time", "svg"):
        rep.add_argument("--" + k.replace("_", "-"), default=None if k == "svg" else "?")
    for k in ("duration", "kill_every", "rotate_every", "lurkers", "typists", "streams", "others", "switchers",
              "stats_max_bytes", "sample_every"):
        rep.add_argument("--" + k.replace("_", "-"), type=int, default=0)
    a = ap.parse_args()
    {"raw": cmd_raw, "control": cmd_control, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    main()
