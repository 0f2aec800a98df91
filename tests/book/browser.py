"""Open a built book page in headless Chromium and report what the browser saw.

Talks the Chrome DevTools Protocol over ``--remote-debugging-pipe`` (JSON messages
separated by NUL bytes on file descriptors 3 and 4), so no WebSocket library is
needed. For one page it collects console errors and warnings, uncaught exceptions,
failed loads (log entries of level error), every network request the page made,
and, after the page settled, how many Vega charts were rendered (an ``<svg>`` or
``<canvas>`` inside an element with class ``vega-embed``).
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

#: How long a page may take to load and render its charts.
PAGE_TIMEOUT_S = 60.0
#: Quiet time after the load event before the DOM is inspected (charts render asynchronously).
SETTLE_S = 3.0

CHART_PROBE = """
(() => {
  const boxes = Array.from(document.querySelectorAll('.vega-embed'));
  const drawn = boxes.filter(b => b.querySelector('svg, canvas'));
  const errors = Array.from(document.querySelectorAll('.error')).map(e => e.textContent).filter(t => t);
  return JSON.stringify({containers: boxes.length, rendered: drawn.length, error_divs: errors});
})()
"""


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclasses.dataclass
class PageReport:
    url: str
    console_errors: list[str]
    exceptions: list[str]
    log_errors: list[str]
    requests: list[str]
    containers: int
    rendered: int
    error_divs: list[str]

    def problems(self) -> list[str]:
        return self.console_errors + self.exceptions + self.log_errors + self.error_divs


class _Pipe:
    def __init__(self, binary: str, profile: str) -> None:
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()
        for fd in (cmd_r, res_w):
            os.set_inheritable(fd, True)
        args = [
            binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-extensions", "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank",
        ]
        # the child sees our cmd_r as fd 3 and res_w as fd 4
        def _fds() -> None:
            os.dup2(cmd_r, 3)
            os.dup2(res_w, 4)

        # close_fds=False: subprocess would otherwise close fds 3 and 4 after _fds ran
        self.proc = subprocess.Popen(args, close_fds=False, preexec_fn=_fds,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        return self._next_id

    def _read_one(self, deadline: float) -> dict[str, Any] | None:
        import select

        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._res_r], [], [], left)
            if not ready:
                return None
            chunk = os.read(self._res_r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = PAGE_TIMEOUT_S) -> dict[str, Any]:
        want = self.send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_one(deadline)
            if msg is None:
                raise TimeoutError(f"no answer to {method} within {timeout:.0f} s")
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, name: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        if any(e.get("method") == name for e in self.events):
            return True
        while True:
            msg = self._read_one(deadline)
            if msg is None:
                return False
            self.events.append(msg)
            if msg.get("method") == name:
                return True

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while self._read_one(deadline) is not None:
            pass

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._cmd_w)
        os.close(self._res_r)


def _console_text(params: dict[str, Any]) -> str:
    parts = []
    for arg in params.get("args", []):
        parts.append(str(arg.get("value", arg.get("description", ""))))
    return " ".join(parts)


def open_page(url: str, binary: str | None = None) -> PageReport:
    """Load `url` in a fresh headless Chromium and report (see module docstring)."""
    binary = binary or chromium_binary()
    if not binary:
        raise FileNotFoundError("chromium not found")
    with tempfile.TemporaryDirectory(prefix="nvmelab-chromium-") as profile:
        pipe = _Pipe(binary, profile)
        try:
            targets = pipe.call("Target.getTargets")["targetInfos"]
            page = next(t for t in targets if t["type"] == "page")
            session = pipe.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
            for domain in ("Runtime", "Log", "Network", "Page"):
                pipe.call(f"{domain}.enable", session=session)
            pipe.call("Page.navigate", {"url": url}, session=session)
            if not pipe.wait_event("Page.loadEventFired", PAGE_TIMEOUT_S):
                raise TimeoutError(f"{url} did not finish loading within {PAGE_TIMEOUT_S:.0f} s")
            pipe.drain(SETTLE_S)
            probe = pipe.call("Runtime.evaluate", {"expression": CHART_PROBE, "returnByValue": True}, session=session)
            charts = json.loads(probe["result"]["value"])
        finally:
            pipe.close()
    console_errors, exceptions, log_errors, requests = [], [], [], []
    for ev in pipe.events:
        method, params = ev.get("method"), ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            console_errors.append(f"console.{params['type']}: {_console_text(params)}")
        elif method == "Runtime.exceptionThrown":
            det = params.get("exceptionDetails", {})
            exceptions.append(f"exception: {det.get('exception', {}).get('description') or det.get('text')}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            e = params["entry"]
            log_errors.append(f"log error: {e.get('text')} ({e.get('url', '')})")
        elif method == "Network.requestWillBeSent":
            requests.append(params.get("request", {}).get("url", ""))
        elif method == "Network.loadingFailed":
            log_errors.append(f"load failed: {params.get('errorText')} (request {params.get('requestId')})")
    return PageReport(url, console_errors, exceptions, log_errors, requests,
                      charts["containers"], charts["rendered"], charts["error_divs"])
