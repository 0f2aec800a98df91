# SPDX-License-Identifier: BSD-3-Clause
"""Open a built book page in headless Chromium and report what the browser saw.

Talks the Chrome DevTools Protocol over ``--remote-debugging-pipe`` (JSON messages
separated by NUL bytes on file descriptors 3 and 4), so no WebSocket library is
needed. For one page it collects console errors and warnings, uncaught exceptions,
failed loads (log entries of level error), every network request the page made,
and, after the page settled, how many Vega charts were rendered (an ``<svg>`` or
``<canvas>`` inside an element with class ``vega-embed``).

It also measures the rendered charts (``LAYOUT_PROBE``), at a fixed viewport of
``VIEWPORT`` pixels: a chart whose box reaches past the text column or is wider than a
container that hides or scrolls its overflow; a label Vega cut short (it ends in an
ellipsis, which is what a legend's or axis's label limit does) or drawn outside the
chart's own area; a panel background outside the chart area (a clipped facet); a
legend with no entries; tick labels of one axis that overlap; a results table
(``nvmelab.book.publication.table``) or any other table of the page wider than the
column. Per chart also: text rendered below ``MIN_TEXT_PX`` once the chart is scaled into
the column (the font size times the smaller scale of the text's own axes), and a label turned on
its side whose box on the page is less than ``MIN_TEXT_PX`` tall (a one-digit tick label rotated
by 270 degrees is as tall as one glyph is wide: about 6 px at an 11 px font, which the font size
alone never showed), no numbered caption, two legend entries that look alike (or differ in colour
only, except a bar chart's filled squares), a legend entry whose colour or dash no mark
uses, a fraction printed as a long decimal. A chart drawn to a
``<canvas>`` cannot be inspected and is reported as such: the book renders SVG. And
it can save a screenshot of the whole page (PNG).

For the page as a whole (``PAGE_PROBE``) it reports the page's height in CSS pixels at
the viewport's width, and any Python repr the page prints where a reader sees it (a dict
such as ``{'key': ...}`` or ``{"key": ...}``, ``np.float64(...)``) in a cell's output or
in the prose; code cells' sources are not looked at.
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


#: Browser window (CSS pixels) in which layout and page height are measured and screenshots are taken.
VIEWPORT = (1400, 900)
#: Screenshots stop at this page height (CSS pixels).
MAX_SCREENSHOT_HEIGHT = 30000

#: The smallest text a chart may render (CSS pixels, after the chart is scaled into the column).
MIN_TEXT_PX = 10

LAYOUT_PROBE = r"""
(() => {
  const MIN_TEXT_PX = %MIN_TEXT_PX%;
  const out = [];
  const tol = 1.5;
  const R = e => e.getBoundingClientRect();
  const column = document.querySelector('article.bd-article') || document.querySelector('article')
      || document.querySelector('main') || document.body;
  const colR = R(column);
  const label = (embed, i) => {
    const fig = embed.closest('figure');
    const num = fig && fig.querySelector('figcaption .caption-number');
    return num ? num.textContent.trim() : `chart ${i + 1}`;
  };
  const visible = t => t.textContent.trim() && t.getAttribute('opacity') !== '0'
      && getComputedStyle(t).opacity !== '0' && getComputedStyle(t).visibility !== 'hidden';
  const outside = (r, box) => r.width > 0 && (r.left < box.left - tol || r.right > box.right + tol
      || r.top < box.top - tol || r.bottom > box.bottom + tol);
  document.querySelectorAll('.vega-embed').forEach((embed, i) => {
    const g = embed.querySelector('svg, canvas');
    if (!g) return;
    const who = label(embed, i);
    const r = R(g);
    if (r.right > colR.right + tol)
      out.push(`${who}: chart overflows the text column by ${Math.round(r.right - colR.right)} px`);
    for (let a = g.parentElement; a && a !== column.parentElement; a = a.parentElement) {
      const cs = getComputedStyle(a);
      if (cs.overflowX !== 'visible' && a.scrollWidth > a.clientWidth + tol) {
        out.push(`${who}: chart is ${a.scrollWidth - a.clientWidth} px wider than its container `
                 + `<${a.tagName.toLowerCase()} class="${a.className}">, which hides or scrolls the rest`);
        break;
      }
    }
    if (g.tagName.toLowerCase() !== 'svg') {
      out.push(`${who}: drawn to a canvas, so its labels cannot be checked (render SVG)`);
      return;
    }
    g.querySelectorAll('text').forEach(t => {
      if (!visible(t)) return;
      const s = t.textContent;
      const role = t.closest('g[class*="role-"]');
      const rc = role ? role.getAttribute('class').replace(/.*(role-[\w-]+).*/, '$1') : 'text';
      if (s.endsWith('\u2026')) out.push(`${who}: ${rc} cut short: "${s}"`);
      if (outside(R(t), r)) out.push(`${who}: ${rc} "${s}" drawn outside the chart area`);
    });
    if (!(embed.closest('figure') && embed.closest('figure').querySelector('figcaption .caption-number')))
      out.push(`${who}: chart has no numbered caption (show it with publication.figure)`);
    const small = new Map(), turned = new Map();
    g.querySelectorAll('text').forEach(t => {
      if (!visible(t)) return;
      const m = t.getScreenCTM();
      // the font size as drawn: the smaller of the two scales of the text's own axes (a chart scaled
      // into the column shrinks both)
      const px = parseFloat(getComputedStyle(t).fontSize) * (m ? Math.min(Math.hypot(m.a, m.b), Math.hypot(m.c, m.d)) : 1);
      const k = t.textContent.trim();
      if (px < MIN_TEXT_PX - 0.05) {
        if (!small.has(k)) small.set(k, px);
      } else if (m && Math.abs(m.b) > 0.01 * Math.hypot(m.a, m.b) && t.closest('g.role-axis-label')) {
        // a tick label turned off the horizontal: what a reader sees is its box on the page, which for a
        // short label on its side is the label's length, not the font's size (a rotated axis title is usual)
        const h = R(t).height;
        if (h > 0 && h < MIN_TEXT_PX - 0.05 && !turned.has(k)) turned.set(k, h);
      }
      if (/^-?0\.\d{4,}$/.test(t.textContent.trim()))
        out.push(`${who}: the fraction "${t.textContent.trim()}" is printed as a long decimal (write 1/64)`);
    });
    if (small.size) {
      const [k, px] = small.entries().next().value;
      out.push(`${who}: ${small.size} text(s) render below ${MIN_TEXT_PX} px, e.g. "${k}" at ${px.toFixed(1)} px `
               + `(too wide for the column: stack or facet the panels)`);
    }
    if (turned.size) {
      const [k, h] = turned.entries().next().value;
      out.push(`${who}: ${turned.size} text(s) turned on their side render below ${MIN_TEXT_PX} px tall, e.g. "${k}" `
               + `${h.toFixed(1)} px (draw short labels horizontally: labelAngle 0)`);
    }
    const marks = {colours: new Set(), dashes: new Set()};
    g.querySelectorAll('path, line, rect, circle').forEach(p => {
      if (p.closest('g.role-legend') || p.closest('g.role-axis') || p.classList.contains('background')) return;
      for (const a of ['stroke', 'fill']) {
        const v = p.getAttribute(a);
        if (v && v !== 'none' && v !== 'transparent') marks.colours.add(v);
      }
      marks.dashes.add(p.getAttribute('stroke-dasharray') || '');
    });
    g.querySelectorAll('g.role-legend').forEach(L => {
      const entries = Array.from(L.querySelectorAll('g.role-legend-entry g.role-scope > g'))
          .map(e => [e.querySelector('.role-legend-symbol path'), e.querySelector('.role-legend-label text')])
          .filter(([s, t]) => s && t && visible(t))
          .map(([s, t]) => ({label: t.textContent.trim(), d: s.getAttribute('d') || '',
                             fill: s.getAttribute('fill') || 'none', stroke: s.getAttribute('stroke') || 'none',
                             dash: s.getAttribute('stroke-dasharray') || '',
                             opacity: s.getAttribute('opacity') || s.getAttribute('fill-opacity') || '1'}));
      const square = e => /^M-?[\d.]+,-?[\d.]+h[\d.]+v[\d.]+h-[\d.]+Z$/.test(e.d.replace(/\s/g, ''));
      const colour = e => `${e.fill}|${e.stroke}|${e.opacity}`;
      // a dash shows only on an unfilled (stroke) symbol: a filled circle looks the same dashed or not
      const form = e => `${e.d}|${(e.fill === 'none' || e.fill === 'transparent') ? e.dash : ''}`;
      const bars = entries.length && entries.every(e => square(e) && e.fill !== 'none');
      outer: for (let a = 0; a < entries.length; a++) for (let b = a + 1; b < entries.length; b++) {
        const A = entries[a], B = entries[b];
        const sameColour = colour(A) === colour(B), sameForm = form(A) === form(B);
        if (sameColour && sameForm) {
          out.push(`${who}: legend entries "${A.label}" and "${B.label}" look alike`);
          break outer;
        }
        if (sameForm && !bars) {
          out.push(`${who}: legend entries "${A.label}" and "${B.label}" differ in colour only (give each series `
                   + `its own shape or dash too)`);
          break outer;
        }
      }
      // a legend of dashes or shapes only draws its symbols in one neutral colour: no colour to find
      const oneColour = new Set(entries.map(colour)).size === 1 && entries.length > 1;
      entries.forEach(e => {
        const col = [e.stroke, e.fill].filter(v => v !== 'none' && v !== 'transparent');
        if (!oneColour && col.length && !col.some(c => marks.colours.has(c)))
          out.push(`${who}: legend entry "${e.label}" names a series that is not drawn (no mark in ${col[0]})`);
        else if (e.dash && !marks.dashes.has(e.dash))
          out.push(`${who}: legend entry "${e.label}" names a line that is not drawn (no mark dashed ${e.dash})`);
      });
    });
    g.querySelectorAll('path.background').forEach(p => {
      if (outside(R(p), r)) out.push(`${who}: a panel reaches outside the chart area (clipped panel)`);
    });
    g.querySelectorAll('g.role-legend').forEach(L => {
      const labels = Array.from(L.querySelectorAll('.role-legend-label text')).filter(visible);
      const swatches = L.querySelectorAll('.role-legend-symbol path, .role-legend-gradient path');
      if (!labels.length && !swatches.length) out.push(`${who}: empty legend`);
    });
    g.querySelectorAll('g.role-axis').forEach(ax => {
      const ts = Array.from(ax.querySelectorAll('.role-axis-label text')).filter(visible)
          .map(t => [t.textContent, R(t)]);
      outer: for (let a = 0; a < ts.length; a++) for (let b = a + 1; b < ts.length; b++) {
        const A = ts[a][1], B = ts[b][1];
        const ox = Math.min(A.right, B.right) - Math.max(A.left, B.left);
        const oy = Math.min(A.bottom, B.bottom) - Math.max(A.top, B.top);
        if (ox > tol && oy > tol) {
          out.push(`${who}: tick labels overlap: "${ts[a][0]}" and "${ts[b][0]}"`);
          break outer;
        }
      }
    });
  });
  document.querySelectorAll('.nvmelab-table-figure').forEach((box, i) => {
    const num = box.querySelector('.caption-number');
    const who = num ? num.textContent.trim() : `table ${i + 1}`;
    const t = box.querySelector('table');
    if (t && R(t).right > colR.right + tol)
      out.push(`${who}: table overflows the text column by ${Math.round(R(t).right - colR.right)} px`);
    else if (box.scrollWidth > box.clientWidth + tol)
      out.push(`${who}: table is ${box.scrollWidth - box.clientWidth} px wider than its box, which scrolls it`);
  });
  document.querySelectorAll('table').forEach((t, i) => {
    if (t.closest('.nvmelab-table-figure') || !column.contains(t)) return;
    const cap = t.querySelector('caption .caption-number');
    const who = cap ? cap.textContent.trim() : `page table ${i + 1}`;
    const box = t.parentElement;
    if (R(t).right > colR.right + tol)
      out.push(`${who}: table overflows the text column by ${Math.round(R(t).right - colR.right)} px`);
    else if (box && getComputedStyle(box).overflowX !== 'visible' && box.scrollWidth > box.clientWidth + tol)
      out.push(`${who}: table is ${box.scrollWidth - box.clientWidth} px wider than its box, which scrolls it`);
  });
  return JSON.stringify(out);
})()
""".replace("%MIN_TEXT_PX%", str(MIN_TEXT_PX))


PAGE_PROBE = r"""
(() => {
  const REPR = /\{\s*'[^'\n]{1,80}'\s*:|\{\s*"[^"\n]{1,80}"\s*:\s|\bnp\.(?:float|int|uint|bool_?)\d*\(|\bnumpy\.\w+\(/;
  const found = [];
  const look = (el, where) => {
    const text = (el.innerText || '').replace(/\s+/g, ' ');
    const m = text.match(REPR);
    if (!m) return;
    const at = Math.max(0, m.index - 30);
    found.push(`${where}: "${text.slice(at, m.index + 60).trim()}"`);
  };
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  article.querySelectorAll('.cell_output').forEach(o => look(o, 'cell output'));
  article.querySelectorAll('p, li, td, th, dd, dt, figcaption, h1, h2, h3, h4').forEach(el => {
    if (el.closest('.cell_output, .cell_input, .highlight, pre, li li, td td')) return;
    if (el.tagName === 'LI' && el.querySelector('p')) return;  // its paragraphs are looked at one by one
    look(el, el.tagName.toLowerCase());
  });
  const doc = document.scrollingElement || document.documentElement;
  return JSON.stringify({height: Math.ceil(Math.max(doc.scrollHeight, document.body.scrollHeight)),
                         reprs: found});
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
    layout: list[str] = dataclasses.field(default_factory=list)
    screenshot: str | None = None
    #: Height of the whole page (CSS pixels) at the viewport's width.
    height: int = 0
    #: Python reprs the page prints where a reader sees them (see PAGE_PROBE).
    reprs: list[str] = dataclasses.field(default_factory=list)

    def problems(self) -> list[str]:
        return self.console_errors + self.exceptions + self.log_errors + self.error_divs


class _Pipe:
    def __init__(self, binary: str, profile: str) -> None:
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()
        for fd in (cmd_r, res_w):
            os.set_inheritable(fd, True)
        args = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "about:blank",
        ]

        # the child sees our cmd_r as fd 3 and res_w as fd 4
        def _fds() -> None:
            os.dup2(cmd_r, 3)
            os.dup2(res_w, 4)

        # close_fds=False: subprocess would otherwise close fds 3 and 4 after _fds ran
        self.proc = subprocess.Popen(
            args, close_fds=False, preexec_fn=_fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
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

    def call(
        self, method: str, params: dict | None = None, session: str | None = None, timeout: float = PAGE_TIMEOUT_S
    ) -> dict[str, Any]:
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


def open_page(url: str, binary: str | None = None, screenshot: str | os.PathLike | None = None) -> PageReport:
    """Load `url` in a fresh headless Chromium and report (see module docstring); with
    `screenshot`, save a PNG of the whole page there."""
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
            width, height = VIEWPORT
            pipe.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                session=session,
            )
            pipe.call("Page.navigate", {"url": url}, session=session)
            if not pipe.wait_event("Page.loadEventFired", PAGE_TIMEOUT_S):
                raise TimeoutError(f"{url} did not finish loading within {PAGE_TIMEOUT_S:.0f} s")
            pipe.drain(SETTLE_S)
            probe = pipe.call("Runtime.evaluate", {"expression": CHART_PROBE, "returnByValue": True}, session=session)
            charts = json.loads(probe["result"]["value"])
            layout = pipe.call("Runtime.evaluate", {"expression": LAYOUT_PROBE, "returnByValue": True}, session=session)
            if "exceptionDetails" in layout:
                raise RuntimeError(f"layout probe failed: {layout['exceptionDetails']}")
            layout_problems = json.loads(layout["result"]["value"])
            whole = pipe.call("Runtime.evaluate", {"expression": PAGE_PROBE, "returnByValue": True}, session=session)
            if "exceptionDetails" in whole:
                raise RuntimeError(f"page probe failed: {whole['exceptionDetails']}")
            page_facts = json.loads(whole["result"]["value"])
            shot = None
            if screenshot is not None:
                shot = str(screenshot)
                _screenshot(pipe, session, shot)
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
    return PageReport(
        url,
        console_errors,
        exceptions,
        log_errors,
        requests,
        charts["containers"],
        charts["rendered"],
        charts["error_divs"],
        layout_problems,
        shot,
        page_facts["height"],
        page_facts["reprs"],
    )


def _screenshot(pipe: _Pipe, session: str, path: str) -> None:
    import base64

    metrics = pipe.call("Page.getLayoutMetrics", session=session)
    size = metrics.get("cssContentSize") or metrics["contentSize"]
    clip = {
        "x": 0,
        "y": 0,
        "width": max(1, int(size["width"])),
        "height": max(1, min(int(size["height"]), MAX_SCREENSHOT_HEIGHT)),
        "scale": 1,
    }
    shot = pipe.call(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}, session=session
    )
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
