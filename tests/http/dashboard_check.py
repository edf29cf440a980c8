#!/usr/bin/env python3
"""Loads the akt dashboard in headless Chromium and reports what the page shows.

Driven by tests/http/dashboard_browser_test.cpp (which runs the cluster and asserts on the
report). Talks to Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe: fd 3
into the browser, fd 4 out of it, NUL-separated JSON), so it needs nothing beyond the standard
library. Prints one `key=value` line per figure on stdout. Bounds its own time (--timeout) and
kills the browser by its pid on every way out.

  dashboard_check.py --chromium /usr/bin/chromium --url http://127.0.0.1:PORT/ \
      --members 3 --screenshot out.png --pidfile chromium.pid --timeout 60
"""

import argparse
import base64
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time


class Browser:
    def __init__(self, chromium, width, height, pidfile):
        self.profile = tempfile.mkdtemp(prefix="akt-chromium-")
        to_r, self.to_w = os.pipe()      # we write, the browser reads (its fd 3)
        self.from_r, from_w = os.pipe()  # the browser writes (its fd 4), we read

        def child_fds():
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        args = [chromium, "--headless", "--disable-gpu", "--no-sandbox",
                "--remote-debugging-pipe", "--user-data-dir=" + self.profile,
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-sync", "--mute-audio",
                "--disable-dev-shm-usage", "--hide-scrollbars",
                "--window-size=%d,%d" % (width, height), "about:blank"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=child_fds,
                                     pass_fds=(3, 4), start_new_session=True)
        os.close(to_r)
        os.close(from_w)
        if pidfile:
            with open(pidfile, "w") as f:
                f.write(str(self.proc.pid))
        self.next_id = 0
        self.messages = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.events = []

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = os.read(self.from_r, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                self.messages.put(None)
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                self.messages.put(json.loads(raw))

    def call(self, method, params=None, session=None, timeout=15):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._next(deadline, method)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, session, timeout):
        deadline = time.monotonic() + timeout
        for i, e in enumerate(self.events):
            if e.get("method") == method and e.get("sessionId") == session:
                del self.events[i]
                return e
        while True:
            m = self._next(deadline, method)
            if m.get("method") == method and m.get("sessionId") == session:
                return m
            self.events.append(m)

    def _next(self, deadline, what):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer to " + what)
        try:
            m = self.messages.get(timeout=left)
        except queue.Empty:
            raise TimeoutError("no answer to " + what)
        if m is None:
            raise RuntimeError("the browser closed its pipe")
        return m

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the browser and its helper processes
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self.to_w, self.from_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)


# What the page shows, read through the DOM.
STATE_JS = """JSON.stringify({
  refreshes: +document.body.dataset.refreshes,
  members: [...document.querySelectorAll('#members tr.member')].map(r => r.dataset.name),
  states: [...document.querySelectorAll('#members tr.member')].map(r => r.dataset.state),
  member_processed: [...document.querySelectorAll('#members tr.member')]
      .map(r => r.dataset.processed === undefined ? -1 : +r.dataset.processed),
  member_rates: [...document.querySelectorAll('#members tr.member td.rate')].map(c => c.textContent),
  member_points: [...document.querySelectorAll('#members tr.member canvas')].map(c => +c.dataset.points),
  own_points: +(document.getElementById('spark-throughput').dataset.points || 0),
  processed: +document.getElementById('processed-total').textContent,
  throughput: document.getElementById('throughput').textContent,
  grains: document.getElementById('grains-active').textContent,
  peers: document.querySelectorAll('#peers tr.peer').length,
  actor_kinds: document.querySelectorAll('#actor-kinds tr.kind').length,
  grain_kinds: document.querySelectorAll('#grain-kinds tr.kind').length,
  ready: document.getElementById('ready').textContent,
  error: document.getElementById('error').hidden ? '' : document.getElementById('error').textContent,
  external: performance.getEntriesByType('resource').map(e => e.name)
      .filter(n => !n.startsWith(location.origin)).length
})"""

LOAD_JS = """(() => { const n = performance.getEntriesByType('navigation')[0];
  return JSON.stringify({load: n.loadEventEnd - n.startTime,
                         dcl: n.domContentLoadedEventEnd - n.startTime,
                         request: n.requestStart - n.startTime,
                         response: n.responseEnd - n.startTime}); })()"""


def evaluate(b, session, expr):
    r = b.call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session)
    return json.loads(r["result"]["value"])


def wait_state(b, session, pred, timeout):
    deadline = time.monotonic() + timeout
    while True:
        s = evaluate(b, session, STATE_JS)
        if pred(s) or time.monotonic() > deadline:
            return s
        time.sleep(0.1)


def navigate(b, session, url, timeout):
    t0 = time.monotonic()
    b.call("Page.navigate", {"url": url}, session)
    b.wait_event("Page.loadEventFired", session, timeout)
    wall = (time.monotonic() - t0) * 1000
    # loadEventEnd is set once the load handlers returned: read it on the next turn.
    deadline = time.monotonic() + 5
    while True:
        t = evaluate(b, session, LOAD_JS)
        if t["load"] > 0 or time.monotonic() > deadline:
            return t, wall
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--members", type=int, required=True)
    ap.add_argument("--screenshot")
    ap.add_argument("--pidfile")
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()

    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("overall")))
    signal.alarm(int(a.timeout))
    out = {}
    b = Browser(a.chromium, 1400, 1000, a.pidfile)
    try:
        version = b.call("Browser.getVersion", timeout=30)
        out["browser"] = version.get("product", "?").replace(" ", "_")
        target = b.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = b.call("Target.attachToTarget",
                         {"targetId": target, "flatten": True})["sessionId"]
        b.call("Page.enable", session=session)
        b.call("Runtime.enable", session=session)
        b.call("Emulation.setDeviceMetricsOverride",
               {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session)

        # A first navigation to the node (its /health) starts the browser's network service and
        # renderer: reported, not asserted, since it measures the browser's cold start rather
        # than the page.
        cold, _ = navigate(b, session, a.url.rstrip("/") + "/health", 20)
        out["cold_navigation_ms"] = round(cold["load"], 1)
        # The dashboard's load: its navigation timing, then its figures once it refreshed.
        t, wall = navigate(b, session, a.url, 20)
        out["load_ms"] = round(t["load"], 1)
        out["dcl_ms"] = round(t["dcl"], 1)
        out["request_start_ms"] = round(t["request"], 1)
        out["response_end_ms"] = round(t["response"], 1)
        out["load_wall_ms"] = round(wall, 1)
        s1 = wait_state(b, session, lambda s: s["refreshes"] >= 1 and
                        len(s["members"]) >= a.members, 15)
        out["members"] = len(s1["members"])
        out["member_names"] = ",".join(s1["members"])
        out["member_states"] = ",".join(s1["states"])
        out["refreshes_1"] = s1["refreshes"]
        out["processed_1"] = s1["processed"]
        # The nodes kept samples before the page opened (/api/history, the test waited for at
        # least eight): the plots show them within the first refreshes, where live readings
        # alone would need six refreshes for five points.
        h = wait_state(b, session, lambda s: len(s["member_points"]) >= a.members and
                       min(s["member_points"]) >= 5 and s["own_points"] >= 5, 15)
        out["history_refreshes"] = h["refreshes"]
        out["history_points"] = ",".join(str(int(x)) for x in [h["own_points"]] + h["member_points"])
        # Every member's figures, read through this node: each has a count...
        m1 = wait_state(b, session, lambda s: len(s["member_processed"]) >= a.members and
                        min(s["member_processed"]) > 0, 15)
        out["member_processed_1"] = ",".join(str(int(x)) for x in m1["member_processed"])
        # The same page, later: its own refreshes moved the counters, this node's and each
        # member's.
        def moved(s):
            return (s["refreshes"] >= s1["refreshes"] + 2 and s["processed"] > s1["processed"] and
                    len(s["member_processed"]) == len(m1["member_processed"]) and
                    all(x > y for x, y in zip(s["member_processed"], m1["member_processed"])))
        s2 = wait_state(b, session, moved, 15)
        out["member_processed_2"] = ",".join(str(int(x)) for x in s2["member_processed"])
        out["refreshes_2"] = s2["refreshes"]
        out["processed_2"] = s2["processed"]
        out["throughput_2"] = s2["throughput"]
        # A second load of the page: it starts from the node's figures again, higher still.
        t2, wall2 = navigate(b, session, a.url, 20)
        out["reload_ms"] = round(t2["load"], 1)
        out["reload_wall_ms"] = round(wall2, 1)
        s3 = wait_state(b, session, lambda s: s["refreshes"] >= 6 and s["peers"] >= 1 and
                        (s["actor_kinds"] > 0 or s["grain_kinds"] > 0), 15)
        out["refreshes_3"] = s3["refreshes"]
        out["processed_3"] = s3["processed"]
        out["peers"] = s3["peers"]
        out["actor_kinds"] = s3["actor_kinds"]
        out["grain_kinds"] = s3["grain_kinds"]
        out["grains"] = s3["grains"]
        out["ready"] = s3["ready"].replace(" ", "_")
        out["error"] = s3["error"].replace(" ", "_")
        out["external_requests"] = s3["external"]
        out["member_rates"] = ",".join(s3["member_rates"])
        out["member_points"] = ",".join(str(int(x)) for x in s3["member_points"])
        if a.screenshot:
            # A few more refreshes, so that the plots show a line.
            wait_state(b, session, lambda s: s["refreshes"] >= 15, 25)
            shot = b.call("Page.captureScreenshot", {"format": "png"}, session)
            with open(a.screenshot, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
            out["screenshot"] = a.screenshot
        out["ok"] = 1
    except Exception as e:  # reported, not raised: the test prints what came before
        out["ok"] = 0
        out["failure"] = ("%s: %s" % (type(e).__name__, e)).replace("\n", " ")
    finally:
        signal.alarm(0)
        b.close()
    for k, v in out.items():
        print("%s=%s" % (k, v))
    return 0 if out.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
