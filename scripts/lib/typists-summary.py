#!/usr/bin/env python3
"""The goals of issues 15 and 23 beside what scripts/bench-typists measured.

Usage: typists-summary.py PREFIX WORK

PREFIX is the results' path without its suffixes (PREFIX-off.json, -on,
-both, -both-nohold, -burst, -mixed, -hostile-quiet, -hostile-attacked); WORK holds each step's exit status and the
daemon's peak RSS (STEP.status, STEP.rss, in KiB). Prints Markdown: a
table of the goals, then the keystroke model and the harness's figures.
A step that did not run says so.
"""
import json
import os
import sys

BUDGET_MS = 1000.0
MEMORY_BUDGET_KIB = 64 * 1024  # README: the daemon's budget on a board


def load(prefix, step):
    path = f"{prefix}-{step}.json"
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def read(work, step, what):
    try:
        with open(os.path.join(work, f"{step}.{what}")) as f:
            return f.read().strip()
    except OSError:
        return None


def held(doc):
    """The typists of the last rung of the unbroken run from the first
    whose pause p95 kept within the budget, whether the ladder went past
    it (False: the top rung held, the count is a floor), and the first rung
    over the budget."""
    count, over = None, None
    for r in doc["rungs"]:
        p95 = r["pause_p95_ms"]
        if p95 is not None and p95 <= BUDGET_MS:
            count = r["typists"]
        else:
            over = r
            break
    return count, over


def p(v):
    return "missed" if v is None else f"{v:.0f} ms"


def held_text(doc):
    count, over = held(doc)
    if count is None:
        return "none", over
    if over is None:
        return f"≥ {count} (the top rung)", over
    return f"{count} (at {over['typists']}: p95 {p(over['pause_p95_ms'])})", over


def errors_upto(doc, typists):
    return sum(r["errors"] + r["corrupted"] for r in doc["rungs"] if typists is not None and r["typists"] <= typists)


def at_least(doc, goal, label):
    """A goal row: at least `goal` typists at pause p95 within the budget
    with no errors or corrupted completions up to there."""
    n, _ = held(doc)
    t, _ = held_text(doc)
    errs = errors_upto(doc, n)
    met = "met" if n is not None and n >= goal and errs == 0 else "missed"
    return (label, f"{t}; errors and corrupted up to there: {errs}", met)


HOSTILE_RATIO = 1.2  # written before the run (scripts/bench-typists, step 6)


def hostile_answers(work):
    """Every answer `abuse`'s typing sessions got, by what it was, over
    all their kinds."""
    try:
        with open(os.path.join(work, "hostile.abuse")) as f:
            report = json.load(f)
    except (OSError, ValueError):
        return {}
    answers = {}
    for tally in report.values():
        for k, v in tally.items():
            answers[k] = answers.get(k, 0) + v
    return answers


def main():
    prefix, work = sys.argv[1], sys.argv[2]
    off, on, both = load(prefix, "off"), load(prefix, "on"), load(prefix, "both")
    nohold = load(prefix, "both-nohold")
    burst, mixed = load(prefix, "burst"), load(prefix, "mixed")
    rows = []

    if off and on:
        n_off, _ = held(off)
        n_on, on_over = held(on)
        t_off, _ = held_text(off)
        t_on, _ = held_text(on)
        if n_off and n_on:
            ratio = n_on / n_off
            met = "met" if ratio >= 3 else ("not shown: the on run never broke; raise its top rung" if on_over is None else "missed")
            if on_over is None and ratio >= 3:
                met = "met (a floor: the on run never broke)"
            measured = f"off: {t_off}; on: {t_on}; ratio {ratio:.2f}"
        else:
            met, measured = "missed", f"off: {t_off}; on: {t_on}"
        rows.append(("Features on keep pause-suggestion p95 ≤ 1 s for at least 3× the typists of features off (same typists, fabric and slots)", measured, met))
    else:
        rows.append(("Features off and on, same typists", "not run", "-"))

    if both:
        rows.append(at_least(both, 500, "kjv in both slots, features on: at least 500 typists at pause p95 ≤ 1 s, 0 errors"))
    else:
        rows.append(("kjv in both slots, features on: 500 typists", "not run", "-"))

    # Issue 23: the seed's swarm, all typing.
    if both:
        rows.append(at_least(both, 2000, "Issue 23: kjv in both slots: at least 2,000 typists at pause p95 ≤ 1 s, 0 errors"))
        at = next((r for r in both["rungs"] if r["typists"] == 2000), None)
        if at:
            off_fabric = at.get("off_fabric") or {}
            parts = ", ".join(f"{k} {100 * v:.1f}%" for k, v in off_fabric.items() if v > 0)
            fab = at["fabric_requests_per_keystroke"]
            rows.append((
                "Issue 23: at 2,000 typists, fabric requests a keystroke and the keystrokes that never reached the fabric, by mechanism",
                f"{'-' if fab is None else format(fab, '.3f')} fabric requests a keystroke; off the fabric {100 * sum(off_fabric.values()):.1f}% ({parts})",
                "measured",
            ))
    if on:
        rows.append(at_least(on, 1000, "Issue 23: kjv in one slot (fortunes in the other): at least 1,000 typists at pause p95 ≤ 1 s"))
    if both and nohold:
        n_on, _ = held(both)
        n_off, _ = held(nohold)
        t_on, _ = held_text(both)
        t_off, _ = held_text(nohold)
        def fab_at(doc, typists):
            r = next((r for r in doc["rungs"] if r["typists"] == typists), None)
            v = None if r is None else r["fabric_requests_per_keystroke"]
            return "-" if v is None else f"{v:.3f}"
        same = n_off if n_off is not None else (nohold["rungs"][0]["typists"] if nohold["rungs"] else None)
        rows.append((
            "Issue 23: held until a pause, on and off in one run (kjv in both slots)",
            f"on: {t_on}; off: {t_off}; fabric requests a keystroke at {same}: on {fab_at(both, same)}, off {fab_at(nohold, same)}",
            "measured" if n_on is None or n_off is None or n_on > n_off else "no gain",
        ))
    else:
        rows.append(("Issue 23: held until a pause, on and off", "not run", "-"))

    rss = {s: read(work, s, "rss") for s in ("off", "on", "both", "both-nohold", "burst", "mixed", "hostile-quiet", "hostile-attacked")}
    ran = {s: v for s, v in rss.items() if v and v != "?"}
    if ran:
        worst = max(int(v) for v in ran.values())
        rows.append((
            "The daemon within its memory budget (64 MiB peak RSS)",
            ", ".join(f"{s} {int(v) / 1024:.1f} MiB" for s, v in ran.items()),
            "met" if worst <= MEMORY_BUDGET_KIB else "missed",
        ))

    if burst:
        r = burst["rungs"][0] if burst["rungs"] else None
        if r:
            ok = r["ok"] == r["clients"] and r["rejections"] == 0 and r["errors"] == 0 and r["corrupted"] == 0
            met = "met" if ok and not r["violations"] else "missed"
            rows.append((
                f"A burst of {r['clients']}: none failed, rejected or corrupted (queue sized for all), throughput at the fabric's capacity",
                f"{r['ok']} served in {r['seconds']:.2f} s, {r['rps']:.1f}/s = {100 * r['capacity_fraction']:.1f}% of capacity; {r['rejections']} rejected, {r['errors']} errors, {r['corrupted']} corrupt; p99 {r['p99_ms']:.0f} ms",
                met + ("" if not r["violations"] else ": " + "; ".join(v["condition"] for v in r["violations"])),
            ))
    else:
        rows.append(("The burst", "not run", "-"))

    if mixed:
        misses = []
        for rung in mixed["rungs"]:
            for c in rung["classes"]:
                for v in c["result"]["violations"]:
                    value = v["value"]
                    shown = "not measured" if value is None else f"{value:.3g}"
                    misses.append(f"{c['name']} at {rung['clients']} clients: {v['condition']} (measured {shown})")
        rungs = ", ".join(str(r["clients"]) for r in mixed["rungs"])
        rows.append((
            "A mixed profile, each class's target written before the run",
            f"rungs {rungs}: " + ("every class within its target" if not misses else "; ".join(misses)),
            "met" if not misses else "missed (a miss written in advance: see the class and why below)",
        ))
    else:
        rows.append(("A mixed profile", "not run", "-"))

    quiet, attacked = load(prefix, "hostile-quiet"), load(prefix, "hostile-attacked")
    if quiet and attacked and quiet["rungs"] and attacked["rungs"]:
        q, a = quiet["rungs"][0], attacked["rungs"][0]
        qp, ap = q["pause_p95_ms"], a["pause_p95_ms"]
        ok = qp is not None and ap is not None and ap <= BUDGET_MS and ap <= HOSTILE_RATIO * qp
        errs = a["errors"] + a["corrupted"]
        answers = hostile_answers(work)
        # Anything but a status with a typed error (200, "409 superseded", ...):
        # untyped errors, no answer, a connection lost or refused.
        untyped = {k: v for k, v in answers.items() if not (k == "200" or (k[:3].isdigit() and "untyped" not in k))}
        rows.append((
            f"Issue 23, bad input: {a['typists']} typists beside hostile typing sessions, pause p95 at most {HOSTILE_RATIO} x quiet and within 1 s, 0 errors; every hostile request a typed answer",
            f"quiet p95 {p(qp)}, beside them {p(ap)} ({'-' if not qp or ap is None else f'{ap / qp:.2f} x'}); errors and corrupted {errs}; "
            f"hostile requests {sum(answers.values())}, without a typed answer {sum(untyped.values())}",
            "met" if ok and errs == 0 and answers and not untyped else "missed",
        ))
    else:
        rows.append(("Issue 23, bad input: typists beside hostile typing sessions", "not run", "-"))

    print("| goal | measured | |")
    print("|---|---|---|")
    for goal, measured, met in rows:
        print(f"| {goal} | {measured} | {met} |")

    doc = on or off or both
    if doc:
        k = doc["keystroke_model"]
        i, pz = k["interval"], k["pause"]
        print()
        print(
            f"Keystroke model: {doc['corpus']['name']} ({doc['corpus']['passages']} passages, each typed from a word chosen at random); "
            f"intervals log-normal, median {i['median_ms']:.0f} ms, σ {i['sigma']}, cut to {i['min_ms']:.0f}–{i['max_ms']:.0f} ms; "
            f"a pause after every sentence and passage, {pz['after_clause']:.0%} of clauses, {pz['after_word']:.0%} of words, "
            f"log-normal, median {pz['median_ms']:.0f} ms, σ {pz['sigma']}, {pz['min_ms']:.0f}–{pz['max_ms']:.0f} ms; "
            f"debounce {k['debounce_ms']} ms; {doc['connections_per_typist']} connections a typist; "
            f"{doc['max_tokens']} tokens at most, temperature 0; typing seed {doc['typing_seed']}; "
            f"{doc['duration_s']:.0f} s measured a rung after {doc['warmup_s']:.0f} s."
        )
    print()
    for name, d in (("off", off), ("on", on), ("both slots", both)):
        if not d:
            continue
        c = d.get("calibration")
        rungs = d["rungs"]
        cpu = max((r["harness_cpu"] for r in rungs), default=0)
        lag = max((r["harness_lag_p99_ms"] for r in rungs), default=0)
        cal = "not calibrated" if not c else (
            f"against an instant server with {c['typists']} typists: pause p99 {p(c['pause_p99_ms'])}, "
            f"keystrokes late by {c['harness_lag_p99_ms']:.1f} ms at p99, {100 * c['harness_cpu']:.0f}% of a core with the server"
        )
        top = rungs[-1] if rungs else None
        hits = "" if not top else (
            f"; at its last rung ({top['typists']}): {top['requests_per_keystroke']:.2f} requests and "
            f"{'-' if top['fabric_requests_per_keystroke'] is None else format(top['fabric_requests_per_keystroke'], '.2f')} fabric requests a keystroke, "
            f"{100 * top['superseded_share']:.1f}% superseded, {top['cache_hits']} cache, {top['typed_forward_hits']} typed-forward and {top['joined']} joined hits"
        )
        print(f"- Harness, {name}: {cal}; at most {100 * cpu:.0f}% of a core and {lag:.1f} ms late (p99) on any rung{hits}.")


if __name__ == "__main__":
    main()
