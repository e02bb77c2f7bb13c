#!/usr/bin/env python3
"""The typing page (`GET /`) in a real browser: headless Chromium from
Debian's packages (`chromium`, `chromium-driver`), driven over WebDriver
with selenium.

Usage: typing_page.py FABRICD CATALOG

Starts `FABRICD serve --sim` twice and types into the page:
  1. the typing features on (the defaults): type a sentence fast, pause; the
     page must show a suggestion for exactly the text typed, and Tab must
     take it;
  2. the features off (no supersede, no cache), a slow fabric and a short
     queue: every keystroke's request is answered, late, or refused
     `overloaded`; the answers for text no longer in the field (stale) must
     never be shown, nor any error.
Throughout, a MutationObserver records every suggestion the page renders
with the field's text at that moment, and the page's fetch is wrapped to
see every answer; each suggestion shown is then checked against a fresh
completion of exactly the text that was in the field (temperature 0 is
deterministic) or of an earlier text of the session that the field
extends (typed forward answers with the rest of that one): the field's
text and the suggestion must be the start of it.

Exit status: 0 passed; 1 failed (what failed is printed); 77 skipped
because Chromium, its driver or selenium is missing (the Rust test that
runs this fails instead when FABRICD_BROWSER=required, as in CI).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SKIP = 77
MAX_TOKENS = 8
READY_WITHIN = 120  # seconds: a debug build under qemu-user is slow

RECORDER = r"""
window.__seen = [];
window.__answers = [];
window.__sent = 0;
window.__alerts = [];
window.alert = (m) => { window.__alerts.push(String(m)); };
const text = document.getElementById("text");
const sug = document.getElementById("suggestion");
const note = document.getElementById("note");
new MutationObserver(() => {
  window.__seen.push({ghost: sug.textContent, for: sug.dataset.for || "",
                      model: sug.dataset.model || "", value: text.value,
                      note: note.textContent, body: document.body.innerText});
}).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true});
const plain = window.fetch;
window.fetch = async (url, init) => {
  const completion = String(url).endsWith("/v1/completions");
  if (completion) {
    window.__sent += 1;
  }
  const r = await plain(url, init);
  if (completion) {
    const prompt = JSON.parse(init.body).prompt;
    r.clone().text().then((b) => {
      window.__answers.push({status: r.status, prompt: prompt, value: text.value, body: b});
    });
  }
  return r;
};
"""


def fail(msg):
    print(f"typing_page: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def find_browser():
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    missing = [n for n, p in (("chromium", chromium), ("chromium-driver", driver))
               if not (p and os.access(p, os.X_OK))]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip)")
    if missing:
        print(f"typing_page: SKIPPED: not installed: {', '.join(missing)}", file=sys.stderr)
        sys.exit(SKIP)
    return chromium, driver


class Daemon:
    """`fabricd serve --sim` on an ephemeral port with CONFIG (TOML)."""

    def __init__(self, fabricd, catalog, config, time_scale):
        self.dir = tempfile.mkdtemp(prefix="typing-page-")
        path = os.path.join(self.dir, "fabricd.toml")
        with open(path, "w") as f:
            f.write(config)
        self.proc = subprocess.Popen(
            [fabricd, "serve", "--sim", "--catalog", catalog, "--listen", "127.0.0.1:0",
             "--config", path, "--time-scale", str(time_scale)],
            stderr=subprocess.PIPE, text=True, env={**os.environ, "RUST_LOG": "info"})
        self.log = []
        self.addr = None
        ready = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"listening on http://(\S+)", line)
                if m:
                    self.addr = m.group(1)
                if line.rstrip().endswith("serve: ready"):
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(READY_WITHIN) or self.addr is None or self.proc.poll() is not None:
            self.stop()
            fail("fabricd did not come up:\n" + "".join(self.log[-30:]))
        self.url = f"http://{self.addr}"

    def complete(self, model, prompt):
        """A fresh completion of exactly PROMPT, as the page asks but
        without a session."""
        body = json.dumps({"model": model, "prompt": prompt, "max_tokens": MAX_TOKENS,
                           "temperature": 0}).encode()
        req = urllib.request.Request(self.url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        for _ in range(50):
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    return json.load(r)["choices"][0]["text"]
            except urllib.error.HTTPError as e:
                if e.code not in (429, 503, 504):
                    raise
                time.sleep(0.1)
        fail(f"no fresh completion of {prompt!r}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def browser(chromium, driver):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--disable-extensions", "--user-data-dir=" + tempfile.mkdtemp()):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)


def open_page(b, daemon, query):
    from selenium.webdriver.common.by import By

    b.get(f"{daemon.url}/?{query}")
    b.execute_script(RECORDER)
    field = b.find_element(By.ID, "text")
    field.click()
    return field


def type_keys(field, s, gap):
    """Types S a key at a time, GAP seconds apart; with no gap, in one
    WebDriver command, as fast as the browser takes keys."""
    if not gap:
        field.send_keys(s)
        return
    for ch in s:
        field.send_keys(ch)
        if gap:
            time.sleep(gap)


def drained(b, within):
    """Waits until every request the page sent has its answer."""
    end = time.time() + within
    while time.time() < end:
        if b.execute_script("return window.__answers.length === window.__sent;"):
            return
        time.sleep(0.02)
    fail(f"the page's requests were not all answered within {within} s")


def wait_for_ghost(b, within):
    """The suggestion shown for the field's text once typing stops."""
    end = time.time() + within
    while time.time() < end:
        g = b.execute_script(
            "const s = document.getElementById('suggestion');"
            "return [s.textContent, s.dataset.for || '', document.getElementById('text').value];")
        if g[0] and g[1] == g[2]:
            return g
        time.sleep(0.02)
    return None


def check_seen(b, daemon, what):
    """Every suggestion the page rendered was for exactly the field's text
    then, and is the start of a fresh completion of that text; no error
    was ever shown. Returns (suggestions shown, answers seen)."""
    drained(b, 30)
    seen = b.execute_script("return window.__seen;")
    answers = b.execute_script("return window.__answers;")
    alerts = b.execute_script("return window.__alerts;")
    if alerts:
        fail(f"{what}: the page alerted: {alerts}")
    shown = [s for s in seen if s["ghost"]]
    asked = {a["prompt"] for a in answers}
    fresh = {}
    for s in shown:
        if s["for"] != s["value"]:
            fail(f"{what}: a stale suggestion was shown: {s['ghost']!r} for {s['for']!r} "
                 f"while the field held {s['value']!r}")
        # Valid: the field's text and the suggestion are how the model goes
        # on from the field's text, or from an earlier text of the session
        # the field extends (typed forward: the rest of that answer).
        typed, ok, tried = s["value"], False, []
        for p in sorted((p for p in asked | {typed} if typed.startswith(p)), key=len, reverse=True):
            key = (s["model"], p)
            if key not in fresh:
                fresh[key] = daemon.complete(*key)
            tried.append(f"{p!r} + {fresh[key]!r}")
            if (p + fresh[key]).startswith(typed + s["ghost"]):
                ok = True
                break
        if not ok:
            fail(f"{what}: the suggestion {s['ghost']!r} shown for {typed!r} is not how the model "
                 f"goes on from it or an earlier text of the session: {'; '.join(tried[:4])}")
    for s in seen:
        words = re.findall(r"error|overloaded|superseded|deadline|too many|conflict|\b(?:409|429|503|504)\b",
                           s["note"] + " " + s["body"], re.I)
        if words:
            fail(f"{what}: the page showed {words} ({s['note']!r})")
    return shown, answers


def on(b, daemon):
    what = "features on"
    field = open_page(b, daemon, "model=kjv")
    type_keys(field, "And God said", 0)
    g = wait_for_ghost(b, 30)
    if g is None:
        fail(f"{what}: no suggestion at the pause after typing")
    # Tab takes it, and a suggestion for the longer text follows.
    from selenium.webdriver.common.keys import Keys

    before = g[2]
    field.send_keys(Keys.TAB)
    value = b.execute_script("return document.getElementById('text').value;")
    if value != before + g[0]:
        fail(f"{what}: Tab gave {value!r}, not {before + g[0]!r}")
    # Then fast typing over it, a word at a time, pausing between words.
    for word in [" and", " the", " earth"]:
        type_keys(field, word, 0)
        time.sleep(0.2)
    if wait_for_ghost(b, 30) is None:
        value = b.execute_script("return document.getElementById('text').value;")
        last = [a for a in b.execute_script("return window.__answers;") if a["prompt"] == value]
        fail(f"{what}: no suggestion at the last pause, for {value!r}: answers {last}")
    shown, answers = check_seen(b, daemon, what)
    statuses = sorted({a["status"] for a in answers})
    if 409 not in statuses:
        fail(f"{what}: no request was superseded (statuses {statuses}), so that was not tested")
    print(f"typing_page: {what}: {len(answers)} answers (statuses {statuses}), "
          f"{len(shown)} suggestions shown, each for exactly the field's text")


def off(b, daemon):
    what = "features off, slow fabric"
    field = open_page(b, daemon, "model=kjv&deadline_ms=5000")
    # Faster than the fabric answers: every answer but the last keystroke's
    # comes for text the field no longer holds.
    type_keys(field, "In the beginning God created", 0.03)
    # Then slowly, a key once the last one's answer came: the last
    # keystroke's request finds the queue free.
    for ch in " the":
        drained(b, 60)
        field.send_keys(ch)
    if wait_for_ghost(b, 30) is None:
        fail(f"{what}: no suggestion at the pause")
    shown, answers = check_seen(b, daemon, what)
    stale = [a for a in answers if a["status"] == 200 and a["prompt"] != a["value"]]
    refused = [a for a in answers if a["status"] != 200]
    print(f"typing_page: {what}: {len(answers)} answers, {len(stale)} of them stale 200s and "
          f"{len(refused)} refused (statuses {sorted({a['status'] for a in refused})}), "
          f"{len(shown)} suggestions shown, none stale")
    if not stale or not refused:
        fail(f"{what}: {len(stale)} stale answers and {len(refused)} refusals came: "
             "both are needed for the test to test anything")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    fabricd, catalog = sys.argv[1], sys.argv[2]
    chromium, driver = find_browser()
    b = browser(chromium, driver)
    try:
        d = Daemon(fabricd, catalog, "", 1.0)
        try:
            on(b, d)
        finally:
            d.stop()
        # A slow fabric: the old fixed 1.9 ms a token (17 ms a request; the
        # engine's own cycles take microseconds), stretched 20 times, and a
        # queue of two: of the browser's six connections' requests, the
        # rest are refused `overloaded`.
        d = Daemon(fabricd, catalog,
                   "queue_capacity = 2\n"
                   "[sim]\nextra_args = [\"--prefill-us\", \"50\", \"--decode-us\", \"1900\"]\n"
                   "[typing]\nsupersede = false\ncache = false\n"
                   "typed_forward = false\npredictive_admission = false\n", 20.0)
        try:
            off(b, d)
        finally:
            d.stop()
    finally:
        b.quit()
    print("typing_page: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
