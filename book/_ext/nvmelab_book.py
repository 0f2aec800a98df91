"""Sphinx extension for the nvmelab book.

What it adds (all configured from book/conf.py):

* The study chapters. ``conf.STUDIES`` lists (notebook stem, label, title). In any
  source, a line holding only ``NVMELAB_STUDIES`` (inside a toctree) becomes one entry
  per study: ``notebooks/<stem>`` when the notebook exists, else
  ``placeholders/<stem>``. If a notebook does not carry its label, the label is
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
  under ``data/results`` (from their provenance; code in ``nvmelab.environments``).
* ``{published}`` role: a published number from ``data/reference/headline.csv``,
  written ``{published}`experiment|quantity|config|format```` (config and format
  optional), so that prose never types a published figure by hand.
* ``{result}`` role: a number a study notebook glued (``myst_nb.glue``), written
  ``{result}`notebooks/<stem>.ipynb::<key>:<format>|<fallback>```. It is MyST-NB's
  ``{glue:text}`` plus one thing: when the notebook glued ``None`` or did not glue the
  key at all on this build (a sweep skipped on this host, a saturation point not
  reached), the fallback text is shown instead of failing the build. A key that the
  notebook's source never mentions is still an error, so a typo cannot hide.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective, SphinxRole
from sphinx.util.osutil import relative_uri

logger = logging.getLogger(__name__)

STUDIES_TOKEN = "NVMELAB_STUDIES"
VEGA_BUNDLE = "_static/vega/vega-bundle.js"
#: Altair's loader URLs for the three libraries (and the legacy vega-lib), any version.
VEGA_CDN_RE = re.compile(r"https://cdn\.jsdelivr\.net/npm/vega(?:-lite|-embed|-lib)?(?:@[\w.\-]+)?(?:\?noext)?")


# ---------------------------------------------------------------- studies ---
def _study_doc(app: Sphinx, stem: str) -> str:
    nb = Path(app.srcdir) / "notebooks" / f"{stem}.ipynb"
    return f"notebooks/{stem}" if nb.exists() else f"placeholders/{stem}"


def fill_study_toctree(app: Sphinx, docname: str, source: list[str]) -> None:
    """source-read: replace the NVMELAB_STUDIES line with the study documents."""
    text = source[0]
    if STUDIES_TOKEN not in text:
        return
    lines = []
    for line in text.splitlines(keepends=True):
        if line.strip() == STUDIES_TOKEN:
            indent = line[: len(line) - len(line.lstrip())]
            lines.extend(f"{indent}{_study_doc(app, stem)}\n" for stem, _, _ in app.config.nvmelab_studies)
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
            logger.warning("label %s belongs to %s, expected %s", label, std.labels[label][0], docname, location=docname)
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
            row += nodes.entry("", nodes.paragraph(text=cell))
        tbody += row
    return table


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} ({v})" for k, v in d.items()) or "none"


class EnvironmentsDirective(SphinxDirective):
    """Tables of the hosts behind the committed records (nvmelab.environments)."""

    has_content = False
    option_spec = {"results": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        from nvmelab import environments
        from nvmelab.records import RecordError

        root = Path(self.options.get("results") or self.config.nvmelab_results_dir)
        if not root.is_absolute():
            root = Path(self.env.srcdir) / root
        for f in environments.result_files(root):
            self.env.note_dependency(str(f))
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
                ["host", "CPU", "kernel", "GPU", "records", "studies"],
                [[h.host, h.cpu_model(), h.kernel(), h.gpu(), str(h.records), _counts(h.studies)] for h in hosts],
                [2, 4, 3, 3, 1, 4],
            )
        ]
        detail = nodes.definition_list()
        for h in hosts:
            item = nodes.definition_list_item()
            item += nodes.term(text=h.host)
            body = nodes.definition()
            facts = nodes.bullet_list()
            for name, value in (
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


# -------------------------------------------------------------- published ---
class PublishedRole(SphinxRole):
    """``{published}`experiment|quantity|config|format```: a number from headline.csv."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        from nvmelab import reference

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
        self.env.note_dependency(str(path))
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
                text = format(float(value), fmt)
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
    """``{result}`notebooks/<stem>.ipynb::<key>:<format>|<fallback>```."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        spec, sep, fallback = self.text.partition("|")
        if not sep or not fallback.strip() or "::" not in spec:
            msg = self.inliner.reporter.error(
                f"result: expected 'notebooks/<stem>.ipynb::key:format|fallback text', got {self.text!r}",
                line=self.lineno,
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
        node = pending_result(
            refdoc=str(rel.with_suffix("")), key=key, fmt=fmt or "s", fallback=fallback.strip()
        )
        self.set_source_info(node)
        return [node], []


class ResolveResults(SphinxPostTransform):
    """Replace each pending_result with the glued value, or its fallback."""

    default_priority = 5

    def apply(self, **kwargs: Any) -> None:
        from myst_nb.core.variables import format_plain_text
        from myst_nb.ext.glue.crossref import read_glue_cache

        folder = self.env.mystnb_config.output_folder  # type: ignore[attr-defined]
        for node in list(self.document.findall(pending_result)):
            data = read_glue_cache(folder, node["refdoc"]).get(node["key"])
            plain = (data or {}).get("data", {}).get("text/plain")
            if plain is None or plain == "None":
                logger.info("result %s::%s not glued on this build; fallback %r",
                            node["refdoc"], node["key"], node["fallback"])
                text, cls = node["fallback"], "result-fallback"
            else:
                try:
                    text, cls = format_plain_text(plain, node["fmt"]), "pasted-text"
                except (TypeError, ValueError) as exc:
                    logger.warning("result %s::%s: cannot format %r with %r: %s", node["refdoc"], node["key"],
                                   plain, node["fmt"], exc, location=node)
                    text, cls = node["fallback"], "result-fallback"
            node.replace_self(nodes.inline(text, text, classes=[cls]))


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("nvmelab_studies", [], "env")
    app.add_config_value("nvmelab_results_dir", "", "env")
    app.connect("builder-inited", check_vega_bundle)
    app.connect("source-read", fill_study_toctree)
    app.connect("source-read", title_first)
    app.connect("doctree-read", ensure_study_labels, priority=900)
    app.connect("doctree-resolved", localise_vega)
    app.add_directive("nvmelab-environments", EnvironmentsDirective)
    app.add_role("published", PublishedRole())
    app.add_node(pending_result, html=(_visit_skip, None), latex=(_visit_skip, None), text=(_visit_skip, None))
    app.add_role("result", ResultRole())
    app.add_post_transform(ResolveResults)
    # env_version: bump when a change here must re-read every page (an incremental build would not)
    return {"version": "2", "env_version": 2, "parallel_read_safe": True, "parallel_write_safe": True}
