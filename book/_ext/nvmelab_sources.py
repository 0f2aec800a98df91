# SPDX-License-Identifier: BSD-3-Clause
"""The nvmelab book's banner and footer: which data files each page uses (part of the nvmelab_book extension).

A study notebook declares the data files it shows (``nvmelab.book.publication.declare_sources``,
glued as ``nvmelab_sources``) and, in its last code cell, every data file its kernel opened
(``declare_used``, glued as ``nvmelab_used``: an audit hook in ``publication`` notes each file,
whichever loader read it); the two are merged. The page opens with a banner naming those records
(host, preset, dates, commit, from their provenance), the published sources and the other data
files. Without a declaration the banner lists the study's records of the preset being built (and
says so). Every page's footer names the commit and date the book was built from and links the
data files the page uses (declared and read files, ``{published}``, ``{nvmelab-environments}`` and
``{nvmelab-coverage}`` inputs, and the files of every notebook a ``{result}`` on the page quotes);
those files are copied into the site under ``_data/`` so that the links work offline.

Loaded by ``nvmelab_book`` (``app.setup_extension``); other extensions note a file with
``note_data_file(env, path)``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.osutil import relative_uri

logger = logging.getLogger(__name__)


# -------------------------------------------------------- banner and footer ---
#: Where copies of the data files a page uses go in the site.
DATA_DIR = "_data"


def _repo_root(app: Sphinx) -> Path:
    return Path(app.srcdir).resolve().parent


def _data_map(env: Any) -> dict[str, set[str]]:
    if not hasattr(env, "nvmelab_data"):
        env.nvmelab_data = {}
    return env.nvmelab_data


def note_data_file(env: Any, path: str | Path, docname: str | None = None) -> None:
    """Record that page `docname` (default: the one being read) uses the data file `path`."""
    root = Path(env.srcdir).resolve().parent
    full = Path(path).resolve()
    try:
        rel = full.relative_to(root).as_posix()
    except ValueError:
        return  # outside the repository: nothing to link
    _data_map(env).setdefault(docname or env.docname, set()).add(rel)
    env.note_dependency(str(full))


def _purge_data(app: Sphinx, env: Any, docname: str) -> None:
    _data_map(env).pop(docname, None)


def _merge_data(app: Sphinx, env: Any, docnames: set[str], other: Any) -> None:
    for doc in docnames:
        if doc in _data_map(other):
            _data_map(env)[doc] = _data_map(other)[doc]


def _glued_sources(app: Sphinx, docname: str) -> dict[str, list[str]] | None:
    """What the notebook glued about its data files: ``declare_sources`` (records and published it
    shows) merged with ``declare_used`` (every data file it read: records, published and other data),
    or None when it glued neither."""
    import ast

    from nvmelab.book.publication import SOURCES_KEY, USED_KEY

    folder = Path(app.env.mystnb_config.output_folder)  # type: ignore[attr-defined]
    path = folder.joinpath(*docname.split("/")[:-1]) / f"{docname.split('/')[-1]}.glue.json"
    if not path.is_file():
        return None
    glued = json.loads(path.read_text())
    merged: dict[str, list[str]] | None = None
    for key in (SOURCES_KEY, USED_KEY):
        plain = glued.get(key, {}).get("data", {}).get("text/plain")
        if not plain:
            continue
        try:
            part = json.loads(ast.literal_eval(plain))
        except (ValueError, SyntaxError) as exc:
            logger.warning("%s: unreadable %s glue (%s)", docname, key, exc, location=docname)
            continue
        merged = merged or {"records": [], "published": [], "data": []}
        for kind in merged:
            merged[kind] = sorted(set(merged[kind]) | set(part.get(kind) or []))
    return merged


def _inferred_records(app: Sphinx, stem: str) -> list[str]:
    """The study's records for the preset being built (when the notebook declares nothing)."""
    preset = os.environ.get("NVMELAB_PRESET", "standard")
    root = _repo_root(app)
    bases = [Path(app.config.nvmelab_results_dir)]
    if preset == "quick":
        bases.insert(0, root / "build" / "results")
    found = []
    for base in bases:
        found += sorted((base / stem).glob(f"*/{preset}.jsonl"))
    return [p.resolve().relative_to(root).as_posix() if p.resolve().is_relative_to(root) else str(p) for p in found]


#: Calls in a notebook's code that read a published file (for a notebook that declares nothing).
_PUBLISHED_CALL_RE = re.compile(r"""\bpublished\(\s*\\?["']([\w.-]+)\\?["']""")
_HEADLINE_CALL_RE = re.compile(r"\bheadline(?:_value)?\(")
_SEED_CALL_RE = re.compile(r"""\b(?:seed_files\(\s*\\?["'](\d{3})|(blksum_qdepth|seed(\d{3})_\w+)\()""")


def _inferred_published(app: Sphinx, docname: str) -> list[str]:
    """The published files a notebook's code reads (reference.published/headline/seed loaders)."""
    from nvmelab.results import reference

    text = Path(app.env.doc2path(docname)).read_text(encoding="utf-8")
    root = _repo_root(app)
    files: set[Path] = set()
    for name in _PUBLISHED_CALL_RE.findall(text):
        if name in reference.PUBLISHED_FILES:
            files.add(reference.reference_dir() / reference.PUBLISHED_FILES[name])
    if _HEADLINE_CALL_RE.search(text):
        files.add(reference.reference_dir() / "headline.csv")
    for direct, loader, seed in _SEED_CALL_RE.findall(text):
        num = direct or seed or ("002" if loader == "blksum_qdepth" else "")
        if num:
            files.update(reference.seed_files(num))
    out = []
    for f in sorted(files):
        try:
            out.append(f.resolve().relative_to(root).as_posix())
        except ValueError:
            out.append(str(f))
    return out


def _no_records_text(stem: str, published: bool) -> str:
    """What the banner says when a study page shows none of our records (and whether it shows published data)."""
    preset = os.environ.get("NVMELAB_PRESET", "standard")
    try:
        from nvmelab.studies import load_spec

        engine = load_spec(stem).engine
    except Exception:  # noqa: BLE001 - a page without a spec still gets a banner
        engine = ""
    shows = "this page shows published data only." if published else "this page shows no measured data."
    if engine == "cuda":
        return (
            f"none: our device-initiated (GPU) records of preset {preset} are not taken yet (they need a CUDA "
            f"GPU); {shows}"
        )
    return f"none: no records of preset {preset} exist yet for this study; {shows}"


def _banner(app: Sphinx, docname: str, decl: dict[str, list[str]] | None, stem: str) -> nodes.container:
    from nvmelab.book.publication import describe_records

    root = _repo_root(app)
    declared = decl is not None
    records = (decl or {}).get("records") or ([] if declared else _inferred_records(app, stem))
    published = (decl or {}).get("published") or ([] if declared else _inferred_published(app, docname))
    other = (decl or {}).get("data") or []
    box = nodes.container(classes=["nvmelab-banner"])
    head = nodes.paragraph()
    head += nodes.strong(text="Records shown. " if declared else "Records of this study (preset being built). ")
    if not records:
        head += nodes.Text(_no_records_text(stem, bool(published)))
        box += head
    else:
        box += head
        items = nodes.bullet_list()
        for src in describe_records([p if Path(p).is_absolute() else root / p for p in records]):
            li = nodes.list_item()
            para = nodes.paragraph()
            para += nodes.literal(text=src.path)
            para += nodes.Text(": " + src.summary() + ".")
            if src.smoke_test:
                para += nodes.emphasis(text=" Smoke-test records (quick preset), not measurements to quote.")
                logger.warning(
                    "%s shows smoke-test (quick) records %s; the book publishes measured records only",
                    docname,
                    src.path,
                    location=docname,
                )
            li += para
            items += li
            note_data_file(app.env, src.path if Path(src.path).is_absolute() else root / src.path, docname)
        box += items
    for title, files, after, none in (
        (
            "Published sources. " if declared else "Published sources (read by its code). ",
            published,
            " (data/reference/README.md names where each comes from).",
            "none." if declared else "not declared by this notebook.",
        ),
        ("Other data files read. ", other, " (derived tables and benchmark results of this repository).", None),
    ):
        if not files and none is None:
            continue
        para = nodes.paragraph()
        para += nodes.strong(text=title)
        for i, p in enumerate(files):
            if i:
                para += nodes.Text(", ")
            para += nodes.literal(text=p)
            note_data_file(app.env, root / p, docname)
        para += nodes.Text(after if files else none)
        box += para
    return box


def add_banner(app: Sphinx, doctree: nodes.document) -> None:
    """doctree-read: open each study page with the banner of the records and sources it shows."""
    docname = app.env.docname
    stems = {f"notebooks/{stem}": stem for stem, _, _ in app.config.nvmelab_studies}
    stem = stems.get(docname)
    if stem is None:
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None:
        return
    decl = _glued_sources(app, docname)
    try:
        banner = _banner(app, docname, decl, stem)
    except (OSError, ValueError) as exc:
        logger.warning("%s: cannot describe its records: %s", docname, exc, location=docname)
        return
    at = 1 if section.children and isinstance(section[0], nodes.title) else 0
    section.insert(at, banner)


def _build_stamp(app: Sphinx) -> dict[str, str]:
    root = _repo_root(app)

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no")) if commit else False
    return {
        "commit": (commit[:12] + (" with uncommitted changes" if dirty else ""))
        if commit
        else "unknown (not a git checkout)",
        "commit_full": commit,
        "commit_date": git("show", "-s", "--format=%cs", "HEAD") if commit else "",
        "built_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "preset": os.environ.get("NVMELAB_PRESET", "standard"),
    }


def footer_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """html-page-context: the build stamp and this page's data files for nvmelab-footer.html."""
    if not hasattr(app, "nvmelab_stamp"):
        app.nvmelab_stamp = _build_stamp(app)  # type: ignore[attr-defined]
    context["nvmelab_build"] = app.nvmelab_stamp  # type: ignore[attr-defined]
    here = app.builder.get_target_uri(pagename)
    files = sorted(_data_map(app.env).get(pagename, ()))
    context["nvmelab_data_links"] = [(relative_uri(here, f"{DATA_DIR}/{f}"), f) for f in files]


def copy_data_files(app: Sphinx, exception: Exception | None) -> None:
    """build-finished: copy every data file a page links into <outdir>/_data/ (offline links)."""
    if exception is not None or app.builder.format != "html":
        return
    root = _repo_root(app)
    for rel in sorted(set().union(*_data_map(app.env).values()) if _data_map(app.env) else ()):
        src, dst = root / rel, Path(app.outdir) / DATA_DIR / rel
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        else:
            logger.warning("data file %s linked from the book does not exist", rel)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-read", add_banner, priority=400)
    app.connect("env-purge-doc", _purge_data)
    app.connect("env-merge-info", _merge_data)
    app.connect("html-page-context", footer_context)
    app.connect("build-finished", copy_data_files)
    return {"version": "1", "env_version": 1, "parallel_read_safe": True, "parallel_write_safe": True}
