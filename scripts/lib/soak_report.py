"""scripts/soak's Markdown report (issue 32), from its work directory:
`python3 soak.py report WORK [...]` calls `cmd_report` here with its
arguments (soak.py's `main` names them). Reads what scripts/soak left in
WORK: the ladders' and bench-abuse's JSON, the raw-HTTP and control-socket
answers, the samples, baselines and quiet-spell rows, the stats snapshots
and the events; prints the report and writes the SVG beside it.
"""

import glob
import json
import os
from collections import Counter, defaultdict


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def lines(path):
    try:
        with open(path) as f:
            return [l.rstrip("\n") for l in f if l.strip()]
    except OSError:
        return []


def num(x):
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def mib(kib):
    return f"{kib / 1024:.1f}"


def windows_of(stats):
    """(boot_id, index) -> window, from a /stats or `fabricctl stats --json` answer."""
    if not isinstance(stats, dict):
        return {}
    d = stats.get("data", stats)
    ws = d.get("windows", []) if isinstance(d, dict) else []
    return {(w.get("boot_id"), w.get("index"), w.get("start_ms")): w for w in ws if isinstance(w, dict)}


def wsum(w):
    return sum(w.get("requests", {}).values())


def merge_windows(sources):
    """The latest of each window across snapshots (a window only grows)."""
    best = {}
    for s in sources:
        for k, w in windows_of(s).items():
            if k not in best or wsum(w) >= wsum(best[k]):
                best[k] = w
    return best


def outcome_totals(ws):
    c = Counter()
    overlapped = 0
    for w in ws.values():
        for k, v in w.get("requests", {}).items():
            c[k] += v
        overlapped += w.get("overlapped", 0) or 0
    return c, overlapped


def class_rows(doc):
    """A ladder JSON's per-class rung records: (name, record)."""
    out = []
    if not isinstance(doc, dict):
        return out
    for r in doc.get("rungs", []):
        classes = r.get("classes") if isinstance(r, dict) else None
        if isinstance(classes, dict):
            for name, rec in classes.items():
                out.append((name, rec))
        elif isinstance(classes, list):
            for rec in classes:
                res = dict(rec.get("result", rec))
                res.setdefault("clients", rec.get("clients", 0))
                out.append((rec.get("name", "?"), res))
        else:
            out.append(("requests", r))
    return out


def svg(samples, boards, path):
    """RSS and descriptors of each board over the run, two panels."""
    W, H, L, T, G = 760, 200, 60, 20, 50
    colors = {"board1": "#1f77b4", "board2": "#d62728"}
    tmax = max((s["t"] for s in samples), default=1) or 1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{2 * H + G + 40}" font-family="sans-serif" font-size="11">']
    for i, (key, label, scale) in enumerate((("rss", "RSS MiB", 1024), ("fds", "descriptors", 1))):
        y0 = T + i * (H + G)
        vals = [s[key] / scale for s in samples if s[key]]
        vmax = max(vals, default=1) * 1.1 or 1
        out.append(f'<rect x="{L}" y="{y0}" width="{W - L - 10}" height="{H}" fill="none" stroke="#999"/>')
        out.append(f'<text x="{L}" y="{y0 - 5}">{label} (0 to {vmax:.0f}), against seconds (0 to {tmax})</text>')
        for b in boards:
            pts = [(L + (W - L - 10) * s["t"] / tmax, y0 + H - H * (s[key] / scale) / vmax)
                   for s in samples if s["board"] == b and s[key]]
            if pts:
                d = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
                out.append(f'<polyline fill="none" stroke="{colors.get(b, "#333")}" stroke-width="1.2" points="{d}"/>')
    y = 2 * H + G + 30
    for j, b in enumerate(boards):
        out.append(f'<text x="{L + 120 * j}" y="{y}" fill="{colors.get(b, "#333")}">{b}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def cmd_report(a):
    w = a.work
    short = a.duration < 3600
    p = print
    p(f"# Soak (issue 32), {a.date}")
    p()
    p(f"Machine: {a.machine}.")
    p(f"Commit: {a.commit}.")
    p(f"Command: `{a.command}`. HAProxy {a.haproxy}, from `fleet/haproxy.cfg` (`scripts/fleet`).")
    p(
        f"Two boards: `fabricd serve --sim`, time scale {a.time_scale} ({a.fabric_time}), `scripts/bands/fleet-board.toml`, "
        f"the [typing] of `scripts/bands/typing-mixed.toml` (the completion cache off), `header_read_timeout_ms` an hour (as bench-abuse's, for the lurkers), `stats_checkpoint` 10 s, "
        f"`stats_max_bytes` {a.stats_max_bytes:,}."
    )
    p(
        f"Load through HAProxy: {a.typists} typists, {a.streams} clients streaming 256-token completions "
        f"(kjv), {a.others} clients asking 16 tokens of fortunes (one `ladder --profile`), {a.switchers} typing "
        f"sessions naming another model at every keystroke (`abuse --model-switchers`); {a.lurkers:,} lurkers "
        f"that each fetched `/healthz` once, half on each board directly. A phase of {a.kill_every} s, a "
        f"`kill -9` of a board (in turn) in its middle, a slot switched or reflashed every {a.rotate_every} s, "
        f"the raw-HTTP corpus at each phase's start, control-socket garbage twice a phase, one power cut."
    )
    p()
    if short:
        p(
            f"**A short run ({a.duration} s), not the hour issue 32 asks for: its figures show the soak "
            f"works, not that the daemon holds for an hour.**"
        )
        p()
    p("## Targets, written before the run")
    p()
    p("- every request answered with a result or a typed outcome; 0 errors through HAProxy;")
    p("- RSS after warm-up: drift at most 5% (each quiet spell's RSS against the first quiet spell of the same process);")
    p("- file descriptors and threads back to their baseline after each load phase (the idle board's, read again after each restart);")
    p(f"- the stats log within its bound: `stats.log` at most `stats_max_bytes` ({a.stats_max_bytes:,}) and a record, one rotated `stats.log.1` beside it;")
    p("- the stats' totals equal to the clients' own counts, apart from requests overlapping a changeover or a restart;")
    p("- log lines a minute: reported.")
    p()

    events = [l.split("\t") for l in lines(f"{w}/events.tsv")]
    checks = []

    def check(what, figure, target, ok):
        checks.append((what, figure, target, ok))

    # ---- outcomes
    phase_docs = sorted(glob.glob(f"{w}/load-*.json"), key=lambda f: int(f.rsplit("-", 1)[1].split(".")[0]))
    per_class = defaultdict(Counter)
    errors_front = 0
    samples_err = []
    for f in phase_docs:
        doc = load_json(f)
        if doc is None:
            samples_err.append(f"{os.path.basename(f)}: unreadable")
            continue
        for name, rec in class_rows(doc):
            c = per_class[name]
            # A typists' class counts its 200s as completions.
            c["ok"] += rec.get("ok", rec.get("completions", 0)) or 0
            c["requests"] += rec.get("requests", 0) or 0
            c["answers"] += rec.get("answers", 0) or 0
            c["keystrokes"] += rec.get("keystrokes", 0) or 0
            for k, v in (rec.get("typed") or {}).items():
                c[f"typed:{k}"] += v
            c["rejections"] += rec.get("rejections", 0) or 0
            c["errors"] += rec.get("errors", 0) or 0
            c["corrupted"] += rec.get("corrupted", 0) or 0
            # What the clients sent but saw no end of within the measured
            # window: a typist's requests less its answers; for a client
            # sending one request at a time, at most one.
            if rec.get("requests") is not None and rec.get("answers") is not None:
                c["unanswered"] += max((rec.get("requests") or 0) - (rec.get("answers") or 0), 0)
            else:
                c["unanswered"] += rec.get("clients", 0) or 0
            errors_front += (rec.get("errors", 0) or 0) + (rec.get("corrupted", 0) or 0)
            samples_err += [f"{name}: {s}" for s in (rec.get("samples") or [])[:3]]
    missing = [f for f in glob.glob(f"{w}/load-*.log") if not os.path.exists(f[:-4] + ".json")]
    p("## Every request's outcome")
    p()
    p("Through HAProxy, the profile's classes, summed over the phases (the ladder counts what ends within each phase's measured window):")
    p()
    p("| class | requests | ok | typed outcomes | rejected | errors | corrupt |")
    p("|---|---|---|---|---|---|---|")
    for name, c in sorted(per_class.items()):
        typed = ", ".join(f"{k[6:]} {v:,}" for k, v in sorted(c.items()) if k.startswith("typed:") and v) or "-"
        req = c["requests"] or (c["ok"] + c["rejections"] + c["errors"] + sum(v for k, v in c.items() if k.startswith("typed:")))
        p(f"| {name} | {req:,} | {c['ok']:,} | {typed} | {c['rejections']:,} | {c['errors']:,} | {c['corrupted']:,} |")
    p()
    switch = Counter()
    for f in glob.glob(f"{w}/switchers-*.json"):
        d = load_json(f) or {}
        for attack, statuses in d.items():
            if isinstance(statuses, dict):
                for k, v in statuses.items():
                    switch[k] += v
    p(f"Model switchers through HAProxy (statuses): {', '.join(f'{k} {v:,}' for k, v in sorted(switch.items())) or 'none'}.")
    untyped_sw = sum(v for k, v in switch.items() if not k.isdigit())
    p()
    raw = Counter()
    raw_untyped = []
    for f in sorted(glob.glob(f"{w}/raw-*.json")):
        d = load_json(f) or {}
        for name, r in d.items():
            st = r.get("status")
            raw[(st, r.get("type"))] += 1
            if st in ("timeout", "garbled", "reset"):
                raw_untyped.append(f"{name}: {st}")
    p(
        "The raw-HTTP corpus (the fuzz corpus's heads and bodies and the soak's own, each on its own connection): "
        + (", ".join(f"{st}{' ' + t if t else ''} ×{n}" for (st, t), n in sorted(raw.items(), key=lambda x: str(x))) or "not sent")
        + "."
    )
    p()
    att = defaultdict(Counter)
    for f in sorted(glob.glob(f"{w}/abuse-*.json")):
        d = load_json(f) or {}
        for attack, statuses in d.items():
            if isinstance(statuses, dict):
                for k, v in statuses.items():
                    att[attack][k] += v
    p("bench-abuse's attacks against one board directly, each phase (what they were answered): " +
      ("; ".join(f"{k}: " + ", ".join(f"{s} {n:,}" for s, n in sorted(v.items())) for k, v in sorted(att.items())) or "none") + ".")
    p()
    ctl = Counter()
    ctl_bad = []
    for f in sorted(glob.glob(f"{w}/control-*.json")):
        d = load_json(f) or {}
        for name, r in d.items():
            ctl[(r.get("answer"), r.get("type"))] += 1
            if r.get("answer") not in ("typed",):
                ctl_bad.append(f"{name}: {r.get('answer')}")
    p("Control-socket garbage (a line a connection): " +
      (", ".join(f"{ans}{' ' + t if t else ''} ×{n}" for (ans, t), n in sorted(ctl.items(), key=lambda x: str(x))) or "not sent") + ".")
    if ctl_bad:
        p(f"Not answered with a typed refusal: {', '.join(sorted(set(ctl_bad)))}.")
    p()
    lurk = []
    for f in sorted(glob.glob(f"{w}/lurk-*.json")):
        d = load_json(f) or {}
        for r in d.get("rungs", []):
            lurk.append((os.path.basename(f)[5:-5], r.get("lurkers_open"), r.get("lurkers_closed")))
    if lurk:
        p("Lurkers (directly on the boards; a killed board's go with it, and are opened again once it is back): " +
          "; ".join(f"{t} {o} open at the end, {c} closed" for t, o, c in lurk) + ".")
        p()
    if samples_err:
        p("Samples of what failed: " + "; ".join(samples_err[:10]) + ".")
        p()
    if missing:
        p(f"Phases whose ladder wrote no JSON: {', '.join(os.path.basename(m) for m in missing)}.")
        p()
    check("errors and corrupt answers through HAProxy", f"{errors_front:,}", "0", errors_front == 0 and not missing and phase_docs)
    check("every control-socket line answered a typed refusal", f"{sum(n for (a_, _), n in ctl.items() if a_ == 'typed')} of {sum(ctl.values())}", "all", ctl and not ctl_bad)
    check("raw-HTTP corpus: every input answered or closed, none hung", f"{len(raw_untyped)} hung or garbled of {sum(raw.values())}", "0", raw and not raw_untyped)

    # ---- memory, descriptors, threads
    samples = []
    for l in lines(f"{w}/samples"):
        f = l.split()
        if len(f) >= 12:
            samples.append(dict(t=int(f[0]), phase=f[1], board=f[2], pid=f[3], rss=num(f[4]), fds=num(f[5]), thr=num(f[6]),
                                log=num(f[7]), slog=num(f[8]), slog1=num(f[9]), conns=f[10], inflight=f[11]))
    boards = sorted({s["board"] for s in samples})
    rows = [l.split() for l in lines(f"{w}/phase-rows")]
    base = [l.split() for l in lines(f"{w}/baselines")]
    p("## Memory, descriptors and threads")
    p()
    p("Each board's idle baseline (after warm-up, and again after each restart, before HAProxy sends it work), and each phase's quiet spell, its load over:")
    p()
    p(
        "Descriptors are given beside the board's open client connections (`fabricd_connections_open`): "
        "HAProxy keeps idle connections to a board in its pool after the load has gone, and the boards' "
        "`idle_timeout_ms` is an hour (for the lurkers), so the descriptors a phase leaves behind are read "
        "net of the connections still open; a descriptor that is not a connection is a leak."
    )
    p()
    p("| board | pid | when | RSS MiB | descriptors | connections | descriptors − connections | threads |")
    p("|---|---|---|---|---|---|---|---|")

    def netfd(fds, cn):
        return int(fds) - int(cn) if fds.isdigit() and cn.isdigit() else None

    for r in base:
        if len(r) < 7:
            continue
        t, b, pid, rss, fds, thr, cn = r[:7]
        p(f"| {b} | {pid} | baseline at {t} s | {mib(int(rss)) if rss.isdigit() else rss} | {fds} | {cn} | {netfd(fds, cn)} | {thr} |")
    fd_ok = True
    worst = []
    for r in rows:
        if len(r) < 8:
            continue
        ph, t, b, pid, rss, fds, thr, cn = r[:8]
        ref = [x for x in base if len(x) >= 7 and x[1] == b and x[2] == pid]
        ref = ref[-1] if ref else None
        mark = ""
        n, n0 = netfd(fds, cn), (netfd(ref[4], ref[6]) if ref else None)
        if n is not None and n0 is not None and thr.isdigit():
            dfd, dthr = n - n0, int(thr) - int(ref[5])
            mark = f": {dfd:+d} descriptors net of connections, {dthr:+d} threads, against its baseline"
            worst.append(f"{b} after phase {ph} {dfd:+d}/{dthr:+d}")
            if dfd > 0 or dthr > 0:
                fd_ok = False
        else:
            fd_ok = False
        p(f"| {b} | {pid} | after phase {ph}, {t} s{mark} | {mib(int(rss)) if rss.isdigit() else rss} | {fds} | {cn} | {n} | {thr} |")
    p()
    check("descriptors (net of open connections) and threads after each phase, against the baseline",
          "; ".join(worst) or "-", "at most the baseline (+0/+0)", fd_ok and bool(worst))
    # RSS drift: each quiet spell's RSS against the first quiet spell of
    # the same process (a restart starts afresh), and across the board's
    # processes for the record.
    drift_ok = None
    drift_txt = []
    for b in boards:
        qs = [(r[3], int(r[4])) for r in rows if len(r) >= 7 and r[2] == b and r[4].isdigit()]
        if not qs:
            continue
        drift_txt.append(f"{b}: " + ", ".join(f"{mib(x)} MiB (pid {pid})" for pid, x in qs))
        for pid in dict.fromkeys(pid for pid, _ in qs):
            xs = [x for q, x in qs if q == pid]
            if len(xs) >= 2:
                d = max(abs(x - xs[0]) for x in xs[1:]) / xs[0]
                drift_txt[-1] += f"; pid {pid} at most {d * 100:+.1f}%"
                drift_ok = (drift_ok is not False) and d <= 0.05
    p("RSS in each quiet spell, after warm-up (drift: against the first quiet spell of the same process): " + ("; ".join(drift_txt) or "no quiet spells") + ".")
    peak = {b: max((s["rss"] or 0) for s in samples if s["board"] == b) for b in boards}
    if a.svg:
        svg(samples, boards, a.svg)
        p(f"![RSS and descriptors of each board over the run]({os.path.basename(a.svg)})")
        p()
    p("RSS after warm-up, each quiet spell against the first: " + ("; ".join(drift_txt) or "no quiet spells") + ".")
    p("Peak RSS sampled: " + ", ".join(f"{b} {mib(v)} MiB" for b, v in peak.items()) + ".")
    p()
    check("RSS drift after warm-up, within a process", "; ".join(drift_txt) or "-", "≤ 5%" + ("" if drift_ok is not None else " (no process had two quiet spells: not measured)"), bool(drift_ok))

    # ---- stats log
    biggest = max((s["slog"] or 0 for s in samples), default=0)
    biggest1 = max((s["slog1"] or 0 for s in samples), default=0)
    bound = a.stats_max_bytes + 64 * 1024
    p("## The stats log")
    p()
    p(f"Largest `stats.log` sampled: {biggest:,} bytes; largest `stats.log.1`: {biggest1:,} bytes; bound: `stats_max_bytes` {a.stats_max_bytes:,} and a record (64 KiB allowed).")
    storage = []
    for f in sorted(glob.glob(f"{w}/stats-after-restart-*.json")):
        d = load_json(f) or {}
        st = d.get("storage", {})
        storage.append(f"{os.path.basename(f)[20:-5]}: at start {json.dumps(st.get('at_start'))}")
    if storage:
        p()
        p("What each restarted board found on its card:")
        p()
        for s in storage:
            p(f"- {s}")
    p()
    check("stats log within its bound", f"{biggest:,} and {biggest1:,} bytes", f"each ≤ {bound:,}", biggest <= bound and biggest1 <= bound)

    # ---- stats against the clients
    snaps = defaultdict(list)
    for f in glob.glob(f"{w}/stats-*.json"):
        base_ = os.path.basename(f)
        b = base_.rsplit("-", 1)[1][:-5]
        if base_.startswith("stats-disk-"):
            continue
        snaps[b].append(load_json(f))
    mem = {}
    disk = {}
    for b in boards:
        mem[b] = merge_windows(snaps[b])
        disk[b] = merge_windows([load_json(f"{w}/stats-disk-{b}.json")])
    mem_tot, mem_ov = Counter(), 0
    disk_tot, disk_ov = Counter(), 0
    for b in boards:
        c, o = outcome_totals(mem[b]); mem_tot += c; mem_ov += o
        c, o = outcome_totals(disk[b]); disk_tot += c; disk_ov += o
    cli = Counter()
    for name, c in per_class.items():
        cli["ok"] += c["ok"]
        for k, v in c.items():
            if k.startswith("typed:"):
                cli[k[6:]] += v
    warm = num((lines(f"{w}/warm-ok") or ["0"])[0]) or 0
    cli["ok"] += warm
    # The model switchers' statuses: "200", or "409 superseded" and the like.
    for k, v in switch.items():
        parts = k.split()
        cli["ok" if parts[0] == "200" else (parts[1] if len(parts) > 1 else k)] += v
    lurk_ok = lurk_err = 0
    for f in glob.glob(f"{w}/lurk-*.json"):
        for r in (load_json(f) or {}).get("rungs", []):
            lurk_ok += r.get("ok", 0) or 0
            lurk_err += (r.get("errors", 0) or 0) + (r.get("corrupted", 0) or 0)
            for k, v in (r.get("typed") or {}).items():
                cli[k] += v
    cli["ok"] += lurk_ok
    # The raw corpus's completions answered 200 (a /healthz is not a request the stats count).
    raw_ok = sum(1 for f in glob.glob(f"{w}/raw-*.json") for n, r in (load_json(f) or {}).items()
                 if r.get("status") == "200" and "healthz" not in n)
    cli["ok"] += raw_ok
    sw_ok = 0
    p("## The stats against the clients' own counts")
    p()
    p(
        "The daemons' windows as they stood before each kill and at the end (the boards were idle then: "
        "complete), and as the cards hold them after the run (`fabricctl stats --dir`), summed over both "
        "boards and every boot; the clients' count is the profile's classes, the warm-up's "
        f"{warm} requests, the model switchers' answers, the lurkers' ladders' one request a second "
        f"({lurk_ok:,} answered 200, {lurk_err} errors) and the raw corpus's {raw_ok} completions "
        "answered 200, by outcome. The raw corpus's and the attacks' refusals are left out of the clients' "
        "column (a refused head is not always a request the stats count)."
    )
    p()
    keys = sorted(set(mem_tot) | set(disk_tot) | set(cli))
    p("| outcome | daemons | on the cards | clients |")
    p("|---|---|---|---|")
    for k in keys:
        extra = f" + {sw_ok:,} switchers" if k == "ok" and sw_ok else ""
        p(f"| {k} | {mem_tot.get(k, 0):,} | {disk_tot.get(k, 0):,} | {cli.get(k, 0):,}{extra} |")
    p(f"| overlapped a changeover | {mem_ov:,} | {disk_ov:,} | |")
    p()
    ok_stats = mem_tot.get("ok", 0)
    ok_cli = cli.get("ok", 0) + sw_ok
    in_flight_margin = sum(c["unanswered"] for c in per_class.values())
    diff = ok_stats - ok_cli
    p(
        f"Answered `ok`: the daemons {ok_stats:,}, the clients {ok_cli:,} (difference {diff:+,}). Requests "
        f"the daemons served that the clients do not count: those still in flight when a phase's measured "
        f"window closed ({in_flight_margin:,} over the run: the typists' requests less their answers, and one "
        f"a client for the other classes), and answers HAProxy replayed "
        f"on the other board (a board's 503 before any work, retried). The cards' totals fall short of the daemons' by "
        f"what the log's bound rotated out (`stats_max_bytes` and one rotated file: a card keeps its newest records) "
        f"and what a kill or the power cut lost since the last checkpoint."
    )
    p()
    lost = sum(mem_tot.values()) - sum(disk_tot.values())
    # Not a target: what the bounded log rotated out is not told apart from
    # what a kill lost, so this is reported, never judged.
    check("stats on the cards against the daemons' own", f"{lost:,} requests not on the cards",
          "what the log's bound rotated out and a kill or the power cut lost", None)
    check("stats `ok` against the clients' `ok`", f"{ok_stats:,} against {ok_cli:,} ({diff:+,})",
          f"equal within the requests in flight at the phases' ends ({in_flight_margin:,}) and overlapped ({mem_ov:,})",
          abs(diff) <= in_flight_margin + mem_ov)

    # ---- log lines
    p("## Log lines a minute")
    p()
    per_min = defaultdict(lambda: defaultdict(int))
    for b in boards:
        bs = [s for s in samples if s["board"] == b and s["log"] is not None]
        for x, y in zip(bs, bs[1:]):
            if y["log"] >= x["log"]:
                per_min[b][y["t"] // 60] += y["log"] - x["log"]
    if per_min:
        mins = sorted({m for b in per_min for m in per_min[b]})
        p("| minute | " + " | ".join(boards) + " |")
        p("|---|" + "---|" * len(boards))
        for m in mins:
            p(f"| {m} | " + " | ".join(str(per_min[b].get(m, 0)) for b in boards) + " |")
        p()
        worst = max((v for b in per_min for v in per_min[b].values()), default=0)
        p(f"At most {worst} lines in a minute on one board.")
        p()

    # ---- events and samples
    p("## Events")
    p()
    for e in events:
        p(f"    {' '.join(e)[:300]}")
    p()
    p(f"## Samples (every {a.sample_every if hasattr(a, 'sample_every') else '?'} s)")
    p()
    p("| s | phase | board | pid | RSS MiB | fds | threads | log lines | stats.log | stats.log.1 | connections | in flight |")
    p("|---|---|---|---|---|---|---|---|---|---|---|---|")
    step = max(1, len(samples) // 400)
    for s in samples[::step]:
        p(f"| {s['t']} | {s['phase']} | {s['board']} | {s['pid']} | {mib(s['rss']) if s['rss'] else '-'} | {s['fds'] if s['fds'] is not None else '-'} | {s['thr'] if s['thr'] is not None else '-'} | {s['log']} | {s['slog']:,} | {s['slog1']:,} | {s['conns']} | {s['inflight']} |")
    p()

    # ---- the verdict, after the figures it is made of, and again at the top of the tail
    p("## Targets beside the figures")
    p()
    p("| target | figure | goal | |")
    p("|---|---|---|---|")
    for what, fig, goal, ok in checks:
        verdict = "reported" if ok is None else "met" if ok else "**missed**"
        p(f"| {what} | {fig} | {goal} | {verdict} |")
