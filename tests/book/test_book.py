# SPDX-License-Identifier: BSD-3-Clause
"""Checks of the built book (run by `make test-book`, after `make book`).

* the build is clean: Sphinx re-run with -W -n into a temporary folder reports no warning,
  and no page holds an unresolved reference. The notebooks come from the execution cache
  `make book` filled, so the re-build costs about 10 s on 2 cores, not a second execution;
  it is kept (rather than trusting `make book`'s exit status) so that `pytest tests/book`
  run on its own still catches a warning;
* every label the book promises exists and points at a built page;
* no page loads a script, stylesheet or font from the network;
* in headless Chromium (skipped, with the reason, when no Chromium is installed), every
  study page renders its Vega charts from file:// with no console error, no chart overflows
  the text column or a clipping container, no label is cut short or drawn outside its
  chart, no legend is empty and no tick labels overlap, no chart text renders below 10 px,
  every chart has a numbered caption, no two legend entries look alike or name a series not
  drawn, no fraction prints as a long decimal, no table is wider than the column
  (browser.LAYOUT_PROBE); the other chapters are opened too, and a screenshot of every page
  is saved under book/_build/screenshots/ (CI keeps it);
* every page's height at the browser's width (1,400 px) is written to page-heights.txt beside the
  screenshots; a chapter of the reader's path (the study pages, introduction, conclusions) taller than
  8,000 px fails, any other page taller than 12,000 px fails; no chapter prints a Python repr (a dict,
  ``np.float64(...)``) in an output or its prose;
* every study page opens with the banner of the records it shows, and every page's footer
  names the build commit and links its data files, which exist in the site.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
HTML = Path(os.environ.get("NVMELAB_BOOK_HTML", BOOK / "_build" / "html"))  # override: check another build
sys.path.insert(0, str(Path(__file__).resolve().parent))

REQUIRED_LABELS = (
    "sec-introduction",
    "sec-background",
    "sec-architecture",
    "sec-driver",
    "sec-environments",
    "sec-experimental-framework",
    "sec-experiments-cpu-initiated",
    "sec-experiments-tool-comparison",
    "sec-experiments-pcie-bandwidth",
    "sec-experiments-cuda-iosize",
    "sec-experiments-cuda-qdepth",
    "sec-experiments-blksum-qdepth",
    "sec-experiments-vram-cache",
    "sec-experiments-cuda-match",
)
#: Study pages the browser check opens (label -> notebook stem): every study of the book.
sys.path.insert(0, str(BOOK))
with mock.patch.dict(os.environ):  # conf.py exports NVMELAB_PRESET/NVMELAB_RUN for its kernels: not for our tests
    from conf import STUDIES  # noqa: E402  (book/conf.py: the study list)

BROWSER_PAGES = {label: stem for stem, label, _ in STUDIES}
#: Where the browser check saves a screenshot of every study page (CI keeps this folder).
SCREENSHOTS = Path(os.environ.get("NVMELAB_SCREENSHOTS", HTML.parent / "screenshots"))
#: How long the clean re-build may take (notebooks come from the cache).
REBUILD_TIMEOUT_S = 1200


def built_pages() -> list[Path]:
    if not (HTML / "index.html").is_file():
        pytest.fail(f"{HTML}/index.html is missing: run `make book` first")
    return sorted(p for p in HTML.rglob("*.html") if "_static" not in p.parts)


def std_labels() -> dict[str, str]:
    """label -> built page URI, from the object inventory Sphinx wrote."""
    from sphinx.util.inventory import InventoryFile

    inv_path = HTML / "objects.inv"
    if not inv_path.is_file():
        pytest.fail(f"{inv_path} is missing: run `make book` first")
    with open(inv_path, "rb") as f:
        inv = InventoryFile.load(f, "", lambda base, uri: uri)
    data = inv.data if hasattr(inv, "data") else inv
    labels = data.get("std:label", {})
    out = {}
    for name, item in labels.items():
        uri = item.uri if hasattr(item, "uri") else item[2]
        out[name] = uri.split("#", 1)[0]
    return out


# ------------------------------------------------------------ clean build ---
def test_rebuild_has_no_warnings(tmp_path: Path) -> None:
    """Re-run the book build with -W -n; any warning (or unresolved reference) fails."""
    warnings = tmp_path / "warnings.txt"
    env = dict(os.environ)
    env.setdefault("NVMELAB_PRESET", "standard")
    env.setdefault("NVMELAB_RUN", "never")
    cmd = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-n",
        "-q",
        "-b",
        "html",
        "-d",
        str(tmp_path / "doctrees"),
        "-w",
        str(warnings),
        str(BOOK),
        str(tmp_path / "html"),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=REBUILD_TIMEOUT_S)
    text = warnings.read_text() if warnings.exists() else ""
    assert proc.returncode == 0 and not text.strip(), (
        f"book build is not clean (exit {proc.returncode}):\n{text}\n{proc.stderr[-4000:]}"
    )


class _XrefFinder(HTMLParser):
    """Collects cross-reference spans that are not inside a link (= unresolved)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.unresolved: list[str] = []
        self._grab: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class") or ""
        if tag == "span" and "xref" in cls.split() and "a" not in self.stack:
            self._grab = []
        self.stack.append(tag)

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop() == tag:
                break
        if tag == "span" and self._grab is not None:
            self.unresolved.append("".join(self._grab).strip())
            self._grab = None

    def handle_data(self, data):
        if self._grab is not None:
            self._grab.append(data)


def test_no_unresolved_references_in_html() -> None:
    bad = {}
    for page in built_pages():
        finder = _XrefFinder()
        finder.feed(page.read_text(encoding="utf-8"))
        if finder.unresolved:
            bad[str(page.relative_to(HTML))] = finder.unresolved
    assert not bad, f"unresolved cross-references: {bad}"


# ----------------------------------------------------------------- labels ---
def test_required_labels_exist() -> None:
    labels = std_labels()
    missing = [lb for lb in REQUIRED_LABELS if lb not in labels]
    assert not missing, f"labels missing from the book: {', '.join(missing)}"
    for lb in REQUIRED_LABELS:
        target = HTML / labels[lb]
        assert target.is_file(), f"label {lb} points at {labels[lb]}, which was not built"


def test_every_study_spec_is_its_notebook_in_the_book() -> None:
    """The study list is the specs: every spec's notebook is built, under the spec's label (a spec shown in
    another study's chapter, `chapter = ...`, has no notebook of its own)."""
    from nvmelab.studies import list_specs, load_spec

    labels = std_labels()
    assert sorted(stem for stem, _, _ in STUDIES) == [n for n in list_specs() if load_spec(n).chapter in ("", n)]
    for stem, label, _ in STUDIES:
        assert (HTML / "notebooks" / f"{stem}.html").is_file(), f"{stem}.ipynb was not built into the book"
        assert labels.get(label) == f"notebooks/{stem}.html", f"{label} does not point at notebooks/{stem}.html"


def test_book_refuses_the_quick_preset(tmp_path: Path) -> None:
    """quick records are a smoke test: the book build stops at once under NVMELAB_PRESET=quick."""
    env = dict(os.environ, NVMELAB_PRESET="quick")
    cmd = [
        sys.executable,
        "-m",
        "sphinx",
        "-q",
        "-b",
        "html",
        "-d",
        str(tmp_path / "d"),
        str(BOOK),
        str(tmp_path / "html"),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "smoke test" in proc.stderr
    assert not (tmp_path / "html" / "index.html").exists()


# ---------------------------------------------------------------- offline ---
_REMOTE = re.compile(r"""^(https?:)?//""", re.I)


class _AssetFinder(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.remote: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("src") and _REMOTE.match(a["src"]):
            self.remote.append(f"<script src={a['src']}>")
        rel = (a.get("rel") or "").lower()
        if (
            tag == "link"
            and a.get("href")
            and _REMOTE.match(a["href"])
            and ("stylesheet" in rel or "preload" in rel or "modulepreload" in rel or "icon" in rel)
        ):
            self.remote.append(f"<link rel={rel} href={a['href']}>")


def test_no_page_loads_from_the_network() -> None:
    bad = {}
    for page in built_pages():
        text = page.read_text(encoding="utf-8")
        finder = _AssetFinder()
        finder.feed(text)
        # script loaders that fetch by URL at run time (Altair's vega loader, requirejs paths)
        finder.remote += re.findall(r"https?://cdn\.[^\s\"'<>]+", text)
        finder.remote += re.findall(r"https?://[^\s\"'<>]+\.js\b", text)
        if "mathjax" in text.lower():
            finder.remote.append("MathJax (the book has no local MathJax)")
        if finder.remote:
            bad[str(page.relative_to(HTML))] = sorted(set(finder.remote))
    for css in (HTML / "_static").rglob("*.css"):
        found = re.findall(
            r"(?:@import|url\()\s*['\"]?(https?:)?//[^)'\"\s]+", css.read_text(encoding="utf-8", errors="replace")
        )
        if found:
            bad[str(css.relative_to(HTML))] = found
    assert not bad, f"pages load assets from the network: {bad}"


def test_vega_bundle_is_vendored() -> None:
    bundle = HTML / "_static" / "vega" / "vega-bundle.js"
    assert bundle.is_file(), "the vendored Vega bundle was not copied into the build"
    head = bundle.read_text(encoding="utf-8")[:2000]
    assert "window.vegaEmbed" in bundle.read_text(encoding="utf-8")[-400:], "bundle does not define vegaEmbed"
    assert "Vega-Lite" in head


# ---------------------------------------------------------------- browser ---
def _need_chromium():
    import browser

    if browser.chromium_binary() is None:
        pytest.skip(
            "no Chromium on PATH (chromium, chromium-browser or google-chrome): the page checks in a "
            "browser are skipped; `make test-browser` installs it and runs them"
        )
    return browser


@functools.cache
def page_report(uri: str):
    """The browser's report of one built page (opened once per test session), with its screenshot."""
    browser = _need_chromium()
    page = HTML / uri
    assert page.is_file(), f"{uri} was not built"
    return browser.open_page(page.as_uri(), screenshot=SCREENSHOTS / f"{Path(uri).stem}.png")


@pytest.mark.parametrize("label", sorted(BROWSER_PAGES))
def test_study_page_renders_charts_offline(label: str) -> None:
    """Charts render offline with no console error and a clean layout; a screenshot is saved."""
    uri = std_labels().get(label)
    assert uri, f"label {label} is missing"
    stem = BROWSER_PAGES[label]
    assert uri == f"notebooks/{stem}.html", (
        f"{label} is the placeholder page {uri}: notebooks/{stem}.ipynb is not in the book yet"
    )
    report = page_report(uri)
    remote = [u for u in report.requests if not u.startswith(("file:", "data:", "blob:", "about:"))]
    assert not remote, f"{uri} requested from the network: {remote}"
    assert not report.problems(), f"{uri}: browser reported {report.problems()}"
    assert report.containers > 0, f"{uri}: no Vega chart container in the page"
    assert report.rendered == report.containers, (
        f"{uri}: {report.rendered} of {report.containers} charts rendered (no <svg>/<canvas> in the rest)"
    )
    assert (SCREENSHOTS / f"{stem}.png").stat().st_size > 0
    assert not report.layout, f"{uri}: chart layout problems:\n  " + "\n  ".join(report.layout)


#: Chapters outside the studies that the browser opens too (every page of the book gets a screenshot).
CHAPTERS = (
    "index",
    "introduction",
    "background",
    "architecture",
    "driver",
    "environments",
    "framework",
    "coverage",
    "conclusions",
    "references",
)
#: The reader's path: the study pages and the two chapters around them. Each must stay shorter than
#: CHAPTER_MAX_PX at the browser's width (browser.VIEWPORT) and print no Python repr.
READER_PATH = ("introduction", "conclusions")
CHAPTER_MAX_PX = 8000
#: Every other page (the appendix: method, engineering, coverage, references).
APPENDIX_MAX_PX = 12000


@pytest.mark.parametrize("stem", CHAPTERS)
def test_chapter_renders_cleanly_and_is_screenshot(stem: str) -> None:
    """Every other chapter: no browser error, no chart or table problem, a screenshot saved."""
    report = page_report(f"{stem}.html")
    assert not report.problems(), f"{stem}: browser reported {report.problems()}"
    assert report.rendered == report.containers, f"{stem}: a chart did not render"
    assert not report.layout, f"{stem}: layout problems:\n  " + "\n  ".join(report.layout)
    assert (SCREENSHOTS / f"{stem}.png").stat().st_size > 0


def _chapter_uris() -> list[str]:
    return [f"notebooks/{stem}.html" for stem in BROWSER_PAGES.values()] + [f"{s}.html" for s in READER_PATH]


def test_page_heights() -> None:
    """Every page measured at the browser's width; the heights are written to page-heights.txt beside
    the screenshots. A chapter (a study page, the introduction, the conclusions) may be at most
    CHAPTER_MAX_PX tall, any other page APPENDIX_MAX_PX."""
    chapters = set(_chapter_uris())
    uris = sorted(chapters | {f"{s}.html" for s in CHAPTERS})
    rows, over = [], []
    for uri in uris:
        height = page_report(uri).height
        limit = CHAPTER_MAX_PX if uri in chapters else APPENDIX_MAX_PX
        rows.append(f"{uri}\t{height}\t{limit}")
        if height > limit:
            over.append(f"{uri}: {height:,} px tall (limit {limit:,} px)")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "page-heights.txt").write_text(
        f"# page\theight_px\tlimit_px (at {browser_width()} px width)\n" + "\n".join(rows) + "\n"
    )
    assert not over, f"pages taller than their limit at {browser_width()} px width:\n  " + "\n  ".join(over)


def browser_width() -> int:
    import browser

    return browser.VIEWPORT[0]


def test_no_chapter_prints_a_python_repr() -> None:
    """No chapter shows a Python dict, list of numpy scalars or similar repr in an output or its prose."""
    found = {uri: page_report(uri).reprs for uri in _chapter_uris()}
    found = {uri: r for uri, r in found.items() if r}
    assert not found, "chapters print Python reprs:\n  " + "\n  ".join(f"{u}: {r}" for u, r in found.items())


# ------------------------------------------------------- banner and footer ---
@pytest.mark.parametrize("label", sorted(BROWSER_PAGES))
def test_study_page_opens_with_banner(label: str) -> None:
    stem = BROWSER_PAGES[label]
    text = (HTML / "notebooks" / f"{stem}.html").read_text(encoding="utf-8")
    h1 = text.find("</h1>")
    banner = text.find('class="nvmelab-banner')
    assert h1 >= 0 and banner > h1, f"{stem}: no banner after the title"
    first_cell = text.find('class="cell ')
    assert first_cell < 0 or banner < first_cell, f"{stem}: the banner does not open the page"
    body = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text[banner : text.find("</div>", banner)]))
    assert "Records" in body and "Published sources" in body
    assert "Smoke-test" not in body and "preset quick" not in body, f"{stem}: the book shows quick records"
    from nvmelab.studies import load_spec

    shown = body.split("Published sources")[0]
    published = body.split("Published sources", 1)[1]
    assert not ("published data only" in shown and published.lstrip(" .").startswith("none")), (
        f"{stem}: the banner says the page shows published data only beside 'Published sources: none'"
    )
    if load_spec(stem).engine == "cuda" and " none: " in shown:
        assert "not taken yet" in shown, f"{stem}: a GPU study without records must say so: {shown}"
    else:  # the committed measured records: host, preset, dates and commit named; a GPU study's come from a lease
        preset = "preset lease" if load_spec(stem).engine == "cuda" else "preset standard"
        for want in (preset, "host ", "measured ", "commit"):
            assert want in shown, f"{stem}: the banner does not name the records' {want.strip()}: {shown}"


def test_every_page_footer_has_build_stamp_and_working_data_links() -> None:
    bad = {}
    for page in built_pages():
        text = page.read_text(encoding="utf-8")
        if "nvmelab-footer" not in text or "from commit" not in text:
            bad[str(page.relative_to(HTML))] = "no build stamp in the footer"
            continue
        foot = text[text.index('class="nvmelab-footer"') :]
        for href in re.findall(r'href="([^"]+)"', foot.split("</div>", 1)[0]):
            if not (page.parent / href).resolve().is_file():
                bad[str(page.relative_to(HTML))] = f"data link {href} leads nowhere"
    assert not bad, bad
