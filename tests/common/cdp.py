"""cdp.py - a headless Chromium driven through the DevTools protocol over
its pipe (--remote-debugging-pipe: requests on the browser's fd 3, replies
and events on its fd 4, each message JSON ended by a NUL byte). Python's
standard library only: no websocket, no pip. Not a test itself; used by
tests/common/flame_browser_test.sh.

    with Browser(chromium, profile_dir) as b:
        page = b.new_page(width=1400, height=900)
        page.navigate("file:///...")          # waits for the load event
        page.wait('document.documentElement.dataset.ptReady === "1"')
        page.eval("1 + 1")                   # -> 2 (by value)
        page.requests                         # every request the page made
        page.errors                           # exceptions, console and log errors
"""
import fcntl
import json
import os
import select
import subprocess
import time

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio",
    "--remote-debugging-pipe",
]


class CdpError(Exception):
    pass


class Browser:
    def __init__(self, chromium, user_data_dir, log_path, timeout=30.0):
        self.timeout = timeout
        to_r, self._w = os.pipe()   # we write, the browser reads (its fd 3)
        self._r, from_w = os.pipe()  # the browser writes (its fd 4), we read

        def child_fds():
            # move both ends above 10 first, so placing them at 3 and 4
            # never overwrites the other
            a = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [chromium] + FLAGS + ["--user-data-dir=" + user_data_dir, "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            preexec_fn=child_fds, pass_fds=(3, 4), start_new_session=True)
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._id = 0
        self.events = []  # (sessionId, method, params), in arrival order

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.proc.poll() is None:
            try:
                self._send("Browser.close", {}, None)
            except OSError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        for fd in (self._w, self._r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()

    def _send(self, method, params, session):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            n = os.write(self._w, data)
            data = data[n:]
        return self._id

    def _read_one(self, deadline):
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError("no answer from the browser in time")
            r, _, _ = select.select([self._r], [], [], left)
            if not r:
                continue
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise CdpError("the browser closed its pipe (exit status %s)" % self.proc.poll())
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=None):
        mid = self._send(method, params or {}, session)
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_one(deadline)
            if m.get("id") == mid:
                if "error" in m:
                    raise CdpError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            if "method" in m:
                self.events.append((m.get("sessionId"), m["method"], m.get("params", {})))

    def pump(self, seconds):
        """Reads events for up to `seconds` (returns at the first lull)."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                r, _, _ = select.select([self._r], [], [], max(0.0, deadline - time.monotonic()))
                if not r and b"\0" not in self._buf:
                    return
                m = self._read_one(deadline)
                if "method" in m:
                    self.events.append((m.get("sessionId"), m["method"], m.get("params", {})))
        except CdpError:
            return

    def new_page(self, width=1400, height=900):
        tid = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = self.call("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
        page = Page(self, sid)
        page.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        for domain in ("Page", "Network", "Runtime", "Log"):
            page.call(domain + ".enable")
        return page


class Page:
    def __init__(self, browser, session):
        self.b = browser
        self.session = session

    def call(self, method, params=None):
        return self.b.call(method, params, self.session)

    def _events(self, method=None):
        return [(m, p) for s, m, p in self.b.events
                if s == self.session and (method is None or m == method)]

    def navigate(self, url):
        n = len(self._events("Page.loadEventFired"))
        r = self.call("Page.navigate", {"url": url})
        if r.get("errorText"):
            raise CdpError("navigate %s: %s" % (url, r["errorText"]))
        deadline = time.monotonic() + self.b.timeout
        while len(self._events("Page.loadEventFired")) == n:
            if time.monotonic() > deadline:
                raise CdpError("no load event for " + url)
            self.b.pump(0.2)

    def eval(self, expr):
        r = self.call("Runtime.evaluate",
                      {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise CdpError("page script failed: %s %s" % (
                d.get("text"), d.get("exception", {}).get("description", "")))
        return r["result"].get("value")

    def wait(self, cond, what=None):
        """Polls the JavaScript expression cond until it is true."""
        deadline = time.monotonic() + self.b.timeout
        while not self.eval("!!(%s)" % cond):
            if time.monotonic() > deadline:
                raise CdpError("timed out waiting for " + (what or cond))
            self.b.pump(0.05)

    @property
    def requests(self):
        """URLs of every request the page sent (Network.requestWillBeSent)."""
        self.b.pump(0)
        return [p["request"]["url"] for _, p in self._events("Network.requestWillBeSent")]

    @property
    def errors(self):
        """Uncaught exceptions, console errors and browser log errors (CSP
        violations are reported there)."""
        self.b.pump(0)
        out = []
        for m, p in self._events():
            if m == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append("exception: %s %s" % (d.get("text"), d.get("exception", {}).get("description", "")))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.%s: %s" % (p["type"], [a.get("value") for a in p.get("args", [])]))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append("log (%s): %s" % (p["entry"].get("source"), p["entry"].get("text")))
        return out
