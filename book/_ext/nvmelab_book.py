# SPDX-License-Identifier: BSD-3-Clause
"""Sphinx extension for the nvmelab book.

What it adds (all configured from book/conf.py):

* The study chapters. ``conf.STUDIES`` lists (notebook stem, label, title), read from
  the study specs. In any source, a line holding only ``NVMELAB_STUDIES`` (inside a
  toctree) becomes one entry ``notebooks/<stem>`` per study. If a notebook does not carry its label, the label is
  attached to the notebook's first section, so ``{ref}`` to a study always works.
* Title first. A study notebook opens with its ``parameters`` cell (papermill's
  convention), then the markdown cell with its title. On a book page the title should
  come first, so the first markdown cell holding an H1 is moved above any code cells
  before it, provided one of those is tagged ``parameters``. Only the order of markdown
  is touched: the code cells, their order and hence the execution cache key stay as
  they are.
* Offline charts. Altair's HTML output loads Vega, Vega-Lite and vega-embed from a
  CDN; every such URL in a page's raw HTML is pointed at the vendored bundle
  ``_static/vega/vega-bundle.js`` (see ``vendor_vega.py``).
* ``{nvmelab-environments}`` directive: the hosts that produced the committed records
  under ``data/results`` (from their provenance; code in ``nvmelab.book.environments``);
  with ``:published:``, the published experiments' environments from ``data/reference/methods.csv``.
* ``{published}`` role: a published number from ``data/reference/headline.csv``,
  written ``{published}`experiment|quantity|config|format```` (config and format
  optional), so that prose never types a published figure by hand.
* ``{result}`` role: a number a study notebook glued (``myst_nb.glue``), written
  ``{result}`notebooks/<stem>.ipynb::<key>:<format>``` (a trailing ``|text`` of older
  sources is accepted and ignored). It is MyST-NB's ``{glue:text}`` across pages, and
  strict: a key the notebook's source never mentions, a key it glued as ``None`` or did
  not glue on this build, and a value the format cannot print each fail the build. No
  sentence is ever printed in place of a missing result: a notebook that has a verdict
  instead of a number (a saturation point not reached) glues that verdict as text. A key
  listed in ``nvmelab_results_pending`` (conf.py, with the reason) shows a visible
  "not available" marker instead, until its notebook glues a value.
* Folded code. Every notebook code cell is shown folded ("Show code cell source"), as
  MyST-NB's ``hide-input`` tag would; the notebooks carry no tags, so they stay plain
  and fully executable in JupyterLab. A cell tagged ``show-input`` stays open.
* Numbered captions. An output made by ``nvmelab.book.publication.figure`` or ``.table``
  carries a ``data-nvmelab-kind`` marker; it becomes a Sphinx figure or an enumerable
  table node with its caption, so ``numfig`` numbers it ("Figure 3", "Table 2") and
  ``{numref}`` can point at it by its name.
* Banner and footer: see ``nvmelab_sources.py`` (loaded from here).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from nvmelab_sources import _data_map, note_data_file  # the banner and footer half of this extension (book/_ext)
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective, SphinxRole
from sphinx.util.osutil import relative_uri

logger = logging.getLogger(__name__)

STUDIES_TOKEN = "NVMELAB_STUDIES"
VEGA_BUNDLE = "_static/vega/vega-bundle.js"
#: Altair's loader URLs for the three libraries (and the legacy vega-lib), any version.
VEGA_CDN_RE = re.compile(r"https://cdn\.jsdelivr\.net/npm/vega(?:-lite|-embed|-lib)?(?:@[\w.\-]+)?(?:\?noext)?")


# ---------------------------------------------------------------- studies ---
def _study_doc(app: Sphinx, stem: str) -> str:
    return f"notebooks/{stem}"


#: A toctree block of a MyST page: its body up to the closing fence.
_TOCTREE_RE = re.compile(r"^(`{3,}|:{3,})\{toctree\}[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)


def _listed_elsewhere(text: str) -> set[str]:
    """Documents that the page's toctrees already list (entries, with or without a "Title <doc>" form)."""
    listed = set()
    for m in _TOCTREE_RE.finditer(text):
        for line in m.group(2).splitlines():
            entry = line.strip()
            if not entry or entry.startswith(":") or entry == STUDIES_TOKEN:
                continue
            inner = re.search(r"<([^<>]+)>$", entry)
            listed.add((inner.group(1) if inner else entry).strip().removesuffix(".ipynb").removesuffix(".md"))
    return listed


def fill_study_toctree(app: Sphinx, docname: str, source: list[str]) -> None:
    """source-read: replace the NVMELAB_STUDIES line with the study documents that no other toctree
    of the same page lists already (the reader's path names some studies; the rest follow here)."""
    text = source[0]
    if STUDIES_TOKEN not in text:
        return
    listed = _listed_elsewhere(text)
    lines = []
    for line in text.splitlines(keepends=True):
        if line.strip() == STUDIES_TOKEN:
            indent = line[: len(line) - len(line.lstrip())]
            docs = [_study_doc(app, stem) for stem, _, _ in app.config.nvmelab_studies]
            lines.extend(f"{indent}{doc}\n" for doc in docs if doc not in listed)
        else:
            lines.append(line)
    source[0] = "".join(lines)


def _has_h1(cell: dict[str, Any]) -> bool:
    text = cell.get("source", "")
    text = "".join(text) if isinstance(text, list) else text
    return any(line.startswith("# ") for line in text.splitlines())


def title_first(app: Sphinx, docname: str, source: list[str]) -> None:
    """source-read: in a notebook, move the title cell above a leading parameters cell."""
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    try:
        nb = json.loads(source[0])
    except ValueError:
        return  # not JSON: let MyST-NB report it
    cells = nb.get("cells", [])
    first_md = next((i for i, c in enumerate(cells) if c.get("cell_type") == "markdown"), None)
    if not first_md or not _has_h1(cells[first_md]):
        return
    before = cells[:first_md]
    tagged = any("parameters" in (c.get("metadata", {}).get("tags") or []) for c in before)
    if tagged and all(c.get("cell_type") == "code" for c in before):
        cells.insert(0, cells.pop(first_md))
        source[0] = json.dumps(nb)


def ensure_study_labels(app: Sphinx, doctree: nodes.document) -> None:
    """doctree-read (after the std domain): give a study notebook its label if it lacks it."""
    docname = app.env.docname
    want = {f"notebooks/{stem}": label for stem, label, _ in app.config.nvmelab_studies}
    label = want.get(docname)
    if not label:
        return
    std = app.env.domains.standard_domain
    if label in std.labels:
        if std.labels[label][0] != docname:
            logger.warning(
                "label %s belongs to %s, expected %s", label, std.labels[label][0], docname, location=docname
            )
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or not section["ids"]:
        logger.warning("study notebook %s has no heading to carry label %s", docname, label, location=docname)
        return
    title = section[0].astext() if section.children else label
    std.anonlabels[label] = (docname, section["ids"][0])
    std.labels[label] = (docname, section["ids"][0], title)


# ----------------------------------------------------------- offline vega ---
def localise_vega(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """doctree-resolved: point Altair's CDN script URLs at the vendored bundle."""
    if app.builder.format != "html":
        return
    local = relative_uri(app.builder.get_target_uri(docname), VEGA_BUNDLE)
    for raw in list(doctree.findall(nodes.raw)):
        if "html" not in raw.get("format", "").split():
            continue
        text = raw.astext()
        if "cdn.jsdelivr.net/npm/vega" not in text:
            continue
        new = VEGA_CDN_RE.sub(local, text)
        raw.replace_self(nodes.raw(new, new, format=raw["format"], classes=raw.get("classes", [])))


def check_vega_bundle(app: Sphinx) -> None:
    """builder-inited: the vendored bundle must be there (run _ext/vendor_vega.py)."""
    if not (Path(app.srcdir) / VEGA_BUNDLE).is_file():
        logger.warning("%s is missing: run .venv/bin/python book/_ext/vendor_vega.py", VEGA_BUNDLE)


# ----------------------------------------------------------- environments ---
def _table(header: list[str], rows: list[list[str]], widths: list[int] | None = None) -> nodes.table:
    table = nodes.table(classes=["nvmelab-table"])
    tgroup = nodes.tgroup(cols=len(header))
    table += tgroup
    for w in widths or [1] * len(header):
        tgroup += nodes.colspec(colwidth=w)
    thead = nodes.thead()
    tgroup += thead
    row = nodes.row()
    for h in header:
        row += nodes.entry("", nodes.paragraph(text=h))
    thead += row
    tbody = nodes.tbody()
    tgroup += tbody
    for r in rows:
        row = nodes.row()
        for cell in r:
            # a break opportunity after each hyphen and slash: names like lease-NVIDIA-H200 or a kernel's
            # 6.18.44-fc-v657-gpu are one word to the browser and would widen a narrow column past its box
            row += nodes.entry("", nodes.paragraph(text=cell.replace("-", "-\u200b").replace("/", "/\u200b")))
        tbody += row
    return table


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} ({v})" for k, v in d.items()) or "none"


class EnvironmentsDirective(SphinxDirective):
    """Tables of the hosts behind the committed records (nvmelab.book.environments); with
    ``:published:``, the published experiments' environments as their sources state them (the
    ``environment`` rows of data/reference/methods.csv, one per study chapter)."""

    has_content = False
    option_spec = {"results": directives.unchanged, "published": directives.flag}

    def _published(self) -> list[nodes.Node]:
        import pandas as pd

        from nvmelab.book import publication
        from nvmelab.results import reference

        path = reference.reference_dir() / publication.METHODS_FILE
        note_data_file(self.env, path)
        df = pd.read_csv(path, dtype=str).fillna("")
        rows = df[df["aspect"] == "environment"]
        titles = {stem: title for stem, _, title in self.config.nvmelab_studies}
        order = {stem: i for i, stem in enumerate(titles)}
        rows = rows.assign(order=rows["study"].map(order).fillna(len(order))).sort_values("order", kind="stable")
        return [
            _table(
                ["chapter", "environment, as the source states it", "source"],
                [[titles.get(r.study, r.study), r.published, r.source] for r in rows.itertuples()],
                [2, 5, 2],
            )
        ]

    def run(self) -> list[nodes.Node]:
        from nvmelab.book import environments
        from nvmelab.results.records import RecordError

        if "published" in self.options:
            return self._published()

        root = Path(self.options.get("results") or self.config.nvmelab_results_dir)
        if not root.is_absolute():
            root = Path(self.env.srcdir) / root
        for f in environments.result_files(root):
            note_data_file(self.env, f)
        try:
            hosts = environments.collect(root)
        except RecordError as exc:
            return [self.state.document.reporter.error(f"committed records unusable: {exc}", line=self.lineno)]
        if not hosts:
            para = nodes.paragraph(
                text=(
                    "No records are committed under data/results yet, so no environment of ours can be "
                    "listed. Running a study notebook writes records there, with their provenance."
                )
            )
            return [para]
        out: list[nodes.Node] = [
            _table(
                ["host", "CPU", "vCPUs", "memory", "virtualisation", "kernel", "GPU", "records"],
                [
                    [
                        h.host,
                        h.cpu_model(),
                        h.cpus(),
                        h.memory_text(),
                        h.virtualisation_text(),
                        h.kernel(),
                        h.gpu(),
                        str(h.records),
                    ]
                    for h in hosts
                ],
                [2, 3, 3, 3, 3, 3, 2, 1],
            )
        ]
        detail = nodes.definition_list()
        for h in hosts:
            item = nodes.definition_list_item()
            item += nodes.term(text=h.host)
            body = nodes.definition()
            facts = nodes.bullet_list()
            for name, value in (
                ("host variables it could not control", h.uncontrolled_text()),
                ("studies", _counts(h.studies)),
                ("targets", _counts(h.targets)),
                ("emulated profile and scale", _counts(h.emulation)),
                ("packages", environments.package_versions(h)),
                ("git commits", ", ".join(h.git_commits) or environments.UNKNOWN),
                ("runs (UTC)", h.span()),
            ):
                li = nodes.list_item()
                li += nodes.paragraph(text=f"{name}: {value}")
                facts += li
            body += facts
            item += body
            detail += item
        out.append(detail)
        return out


class CoverageDirective(SphinxDirective):
    """``{nvmelab-coverage} vocabulary|counts|lines``: the status vocabulary, the lines per status per seed,
    or the seed statements with their status (nvmelab.book.coverage); each seed's rows follow a heading
    row that links its study chapter by the chapter's label, and a study without a chapter fails the build."""

    optional_arguments = 1

    def _heading(self, seed: str, study: str, chapters: dict[str, tuple[str, str]], ncols: int) -> nodes.row:
        """A row spanning the table: the seed and a link to its chapter (by the chapter's label)."""
        from sphinx.addnodes import pending_xref

        if study not in chapters:
            raise self.error(f"nvmelab-coverage: no study chapter {study!r} (chapters: {', '.join(sorted(chapters))})")
        label, title = chapters[study]
        ref = pending_xref("", refdomain="std", reftype="ref", reftarget=label, refexplicit=True, refwarn=True)
        ref += nodes.inline(title, title)
        para = nodes.paragraph("", "", nodes.strong(text=f"Seed {seed}"), nodes.Text(" — chapter: "), ref)
        return nodes.row("", nodes.entry("", para, morecols=ncols - 1), classes=["nvmelab-coverage-seed"])

    def run(self) -> list[nodes.Node]:
        from nvmelab.book import coverage

        part = self.arguments[0] if self.arguments else "lines"
        if part == "vocabulary":
            table = _table(["status", "meaning"], coverage.vocabulary(), [3, 8])
            table["classes"].append("colwidths-given")
            return [table]
        if part == "counts":
            header, body = coverage.counts()
            return [_table(header, body, [4] + [1] * (len(header) - 1))]
        if part != "lines":
            raise self.error(f"nvmelab-coverage: expected vocabulary, counts or lines, got {part!r}")
        for f in coverage.sources():
            note_data_file(self.env, f)
        chapters = {stem: (label, title) for stem, label, title in self.config.nvmelab_studies}
        rows = coverage.rows()
        cols = [coverage.HEADER.index(c) for c in coverage.SHOWN]
        table = _table(coverage.SHOWN, [[r[i] for i in cols] for r in rows], coverage.WIDTHS)
        table["classes"].append("colwidths-given")  # the browser keeps the widths (a narrow status column wraps)
        tbody = next(iter(table.findall(nodes.tbody)))
        seed, where = coverage.HEADER.index("seed"), coverage.HEADER.index("chapter")
        body, last = [], None
        for r, row in zip(rows, list(tbody.children)):
            if (r[seed], r[where]) != last:
                last = (r[seed], r[where])
                body.append(self._heading(r[seed], r[where], chapters, len(cols)))
            body.append(row)
        tbody.children = []
        tbody.extend(body)
        return [table]


# -------------------------------------------------------------- published ---
class PublishedRole(SphinxRole):
    """``{published}`experiment|quantity|config|format```: a number from headline.csv."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        from nvmelab.book.publication import plain_number
        from nvmelab.results import reference

        parts = self.text.split("|")
        if len(parts) < 2 or len(parts) > 4:
            msg = self.inliner.reporter.error(
                f"published: expected 'experiment|quantity[|config[|format]]', got {self.text!r}", line=self.lineno
            )
            return [], [msg]
        experiment, quantity = parts[0].strip(), parts[1].strip()
        config = parts[2].strip() if len(parts) > 2 and parts[2].strip() else None
        fmt = parts[3].strip() if len(parts) > 3 and parts[3].strip() else None
        try:
            table = reference.headline()
            path = reference.reference_dir() / "headline.csv"
        except (FileNotFoundError, OSError) as exc:
            return [], [self.inliner.reporter.error(f"published: {exc}", line=self.lineno)]
        note_data_file(self.env, path)
        sel = table[(table["experiment"] == experiment) & (table["quantity"] == quantity)]
        if config is not None:
            sel = sel[sel["config"] == config]
        if len(sel) != 1:
            msg = self.inliner.reporter.error(
                f"published: {len(sel)} rows of headline.csv match {self.text!r} (need exactly 1)", line=self.lineno
            )
            return [], [msg]
        row = sel.iloc[0]
        value: Any = row["value"]
        text = str(value)
        if fmt:
            try:
                text = plain_number(format(float(value), fmt))
            except ValueError:
                text = str(value)  # a range or bound such as "44-45" or ">512" stays as published
        unit = str(row.get("unit", "") or "")
        title = f"published: {experiment}, {quantity}, {row['config']} ({unit}); source {row['source']}"
        wrapper = nodes.abbreviation(text, text, explanation=title, classes=["published"])
        return [wrapper], []


# ----------------------------------------------------------------- result ---
class pending_result(nodes.Inline, nodes.Element):
    """A glued value to paste once every notebook has been read (see ResolveResults)."""


def _visit_skip(self, node):  # pragma: no cover - resolved before any writer sees it
    raise nodes.SkipNode


class ResultRole(SphinxRole):
    """``{result}`notebooks/<stem>.ipynb::<key>:<format>```."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        spec = self.text
        if "|" in spec:  # the old fallback-sentence syntax: a missing value now fails the build instead
            msg = self.inliner.reporter.error(
                f"result: {self.text!r}: no fallback text ('|...'): a value the notebook does not glue fails the build",
                line=self.lineno,
            )
            return [], [msg]
        if "::" not in spec:
            msg = self.inliner.reporter.error(
                f"result: expected 'notebooks/<stem>.ipynb::key:format', got {self.text!r}", line=self.lineno
            )
            return [], [msg]
        path, _, key_fmt = spec.strip().partition("::")
        key, _, fmt = key_fmt.partition(":")
        here = Path(self.env.doc2path(self.env.docname)).parent
        nb_path = (here / path).resolve()
        if not nb_path.is_file():
            msg = self.inliner.reporter.error(f"result: notebook {path!r} does not exist", line=self.lineno)
            return [], [msg]
        source = nb_path.read_text(encoding="utf-8")
        if f'\\"{key}\\"' not in source and f"'{key}'" not in source:
            msg = self.inliner.reporter.error(
                f"result: {path} never glues a key named {key!r} (a typo?)", line=self.lineno
            )
            return [], [msg]
        self.env.note_dependency(str(nb_path))
        srcdir = Path(self.env.srcdir).resolve()
        try:
            rel = nb_path.relative_to(srcdir)
        except ValueError:  # reached through the notebooks symlink
            rel = Path("notebooks") / nb_path.name
        node = pending_result(refdoc=str(rel.with_suffix("")), key=key, fmt=fmt or "s")
        self.set_source_info(node)
        return [node], []


class ResolveResults(SphinxPostTransform):
    """Replace each pending_result with the glued value; a value that is missing or cannot be
    formatted is a build error (the page shows a visible marker, never a made-up sentence)."""

    default_priority = 5

    def apply(self, **kwargs: Any) -> None:
        from myst_nb.core.variables import format_plain_text
        from myst_nb.ext.glue.crossref import read_glue_cache

        from nvmelab.book.publication import plain_number

        folder = self.env.mystnb_config.output_folder  # type: ignore[attr-defined]
        for node in list(self.document.findall(pending_result)):
            data = read_glue_cache(folder, node["refdoc"]).get(node["key"])
            plain = (data or {}).get("data", {}).get("text/plain")
            missing = f"[result {node['key']} missing]"
            pending = self.config.nvmelab_results_pending.get(f"{node['refdoc']}::{node['key']}")
            if (plain is None or plain == "None") and pending:
                logger.info(
                    "result: %s glued no value for %r; pending in conf.py (%s): shown as not available",
                    node["refdoc"],
                    node["key"],
                    pending,
                )
                text, cls = "[not available in this build]", "result-missing"
            elif plain is None or plain == "None":
                logger.error(
                    "result: %s glued no value for %r on this build (None or not glued); the page cannot state it",
                    node["refdoc"],
                    node["key"],
                    location=node,
                )
                text, cls = missing, "result-missing"
            else:
                try:
                    text, cls = plain_number(format_plain_text(plain, node["fmt"])), "pasted-text"
                except (TypeError, ValueError) as exc:
                    logger.error(
                        "result: %s::%s: cannot format %r with %r: %s",
                        node["refdoc"],
                        node["key"],
                        plain,
                        node["fmt"],
                        exc,
                        location=node,
                    )
                    text, cls = missing, "result-missing"
            node.replace_self(nodes.inline(text, text, classes=[cls]))
            # the page quotes a number computed from the notebook's data: its footer links those files too
            here = self.env.docname
            if here != node["refdoc"]:
                _data_map(self.env).setdefault(here, set()).update(_data_map(self.env).get(node["refdoc"], ()))


# ------------------------------------------------------------- folded code ---
class FoldCode(SphinxPostTransform):
    """Fold every notebook code cell's source, as the ``hide-input`` tag would (HTML only).

    Runs before MyST-NB's HideInputCells (priority 199), which does the wrapping. A cell
    already given a hide mode by its own tags keeps it; a cell tagged ``show-input`` stays open.
    """

    default_priority = 150
    formats = ("html",)

    def run(self, **kwargs: Any) -> None:
        cfg = self.env.mystnb_config  # type: ignore[attr-defined]
        for node in self.document.findall(nodes.container):
            if node.get("nb_element") != "cell_code" or node.get("hide_mode") or not node.children:
                continue
            tags = (node.get("cell_metadata") or {}).get("tags") or []
            if "show-input" in tags or node.children[0].get("nb_element") != "cell_code_source":
                continue
            node["hide_mode"] = "input"
            node["prompt_show"] = cfg.code_prompt_show
            node["prompt_hide"] = cfg.code_prompt_hide


# -------------------------------------------------------- numbered captions ---
#: The marker nvmelab.book.publication writes around a captioned output.
CAPTIONED_RE = re.compile(
    r'<div class="nvmelab-captioned[^"]*" data-nvmelab-kind="(figure|table)"'
    r'(?: data-nvmelab-name="([^"]*)")? data-nvmelab-caption="([^"]*)">'
)
CAPTION_BLOCK_RE = re.compile(r"<!--nvmelab-caption-->.*?<!--/nvmelab-caption-->", re.S)


class captioned_table(nodes.General, nodes.Element):
    """A rendered results table (raw HTML) with a numbered caption ("Table N")."""


def _caption_of(node: nodes.Element) -> str:
    cap = next(iter(node.findall(nodes.caption)), None)
    return cap.astext() if cap is not None else ""


def _visit_captioned_table(self, node: captioned_table) -> None:
    self.body.append(self.starttag(node, "div", CLASS="nvmelab-table-figure"))


def _depart_captioned_table(self, node: captioned_table) -> None:
    self.body.append("</div>\n")


def _visit_captioned_table_other(self, node: captioned_table) -> None:
    pass


def _depart_captioned_table_other(self, node: captioned_table) -> None:
    pass


class CaptionOutputs(SphinxTransform):
    """Turn outputs of nvmelab.book.publication.figure/table into numbered figure/table nodes."""

    default_priority = 500

    def apply(self, **kwargs: Any) -> None:
        count = {"figure": 0, "table": 0}
        for bundle in list(self.document.findall(nodes.container)):
            if bundle.get("nb_element") != "mime_bundle":
                continue
            raw = next(
                (r for c in bundle.children if c.get("mime_type") == "text/html" for r in c.findall(nodes.raw)), None
            )
            if raw is None:
                continue
            text = raw.astext()
            m = CAPTIONED_RE.search(text)
            if not m:
                continue
            kind, name, caption = m.group(1), html.unescape(m.group(2) or ""), html.unescape(m.group(3))
            stripped = CAPTION_BLOCK_RE.sub("", text)
            raw.replace_self(nodes.raw(stripped, stripped, format=raw.get("format", "html")))
            count[kind] += 1
            wrapper: nodes.Element = nodes.figure() if kind == "figure" else captioned_table()
            wrapper["classes"].append(f"nvmelab-{kind}")
            if name:
                wrapper["names"].append(name)
                self.document.note_explicit_target(wrapper, wrapper)
            else:
                wrapper["ids"].append(f"nvmelab-{kind}-{count[kind]}")
            cap = nodes.caption(caption, caption)
            parent = bundle.parent
            parent.replace(bundle, wrapper)
            if kind == "table":
                wrapper += cap
                wrapper += bundle
            else:
                wrapper += bundle
                wrapper += cap


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("nvmelab_studies", [], "env")
    app.add_config_value("nvmelab_results_dir", "", "env")
    app.add_config_value("nvmelab_results_pending", {}, "env")
    app.connect("builder-inited", check_vega_bundle)
    app.connect("source-read", fill_study_toctree)
    app.connect("source-read", title_first)
    app.connect("doctree-read", ensure_study_labels, priority=900)
    app.connect("doctree-resolved", localise_vega)
    app.add_directive("nvmelab-environments", EnvironmentsDirective)
    app.add_directive("nvmelab-coverage", CoverageDirective)
    app.add_role("published", PublishedRole())
    app.add_node(pending_result, html=(_visit_skip, None), latex=(_visit_skip, None), text=(_visit_skip, None))
    app.add_role("result", ResultRole())
    app.add_post_transform(ResolveResults)
    app.add_post_transform(FoldCode)
    app.add_enumerable_node(
        captioned_table,
        "table",
        _caption_of,
        html=(_visit_captioned_table, _depart_captioned_table),
        latex=(_visit_captioned_table_other, _depart_captioned_table_other),
        text=(_visit_captioned_table_other, _depart_captioned_table_other),
    )
    app.add_transform(CaptionOutputs)
    app.setup_extension("nvmelab_sources")
    # env_version: bump when a change here must re-read every page (an incremental build would not)
    return {"version": "3", "env_version": 3, "parallel_read_safe": True, "parallel_write_safe": True}
