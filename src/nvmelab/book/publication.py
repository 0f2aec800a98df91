# SPDX-License-Identifier: BSD-3-Clause
"""How results appear on a book page: rendered tables, captioned figures, and the data a page shows.

Key functions:
    table(df, caption, name=..., units=..., formats=...)   an HTML table with units in the headers and
                                                           thousands separators, captioned
    figure(chart, caption, name=...)                       an Altair chart (or any HTML output), captioned
    declare_sources(records=[...], published=[...])        tell the book which data files the page shows
    note_used(path) / declare_used()                       every data file the page read (registry; the last
                                                           code cell glues it for the footer)
    describe_records(paths)                                host, preset, dates, commits per records file,
                                                           from the records' provenance
    glue_values(values, prefix)                            glue computed numbers and phrases for the prose
    values_table(values)                                   the same values as a table (quantity, value)
    format_number(value, fmt=None)                         one number as a table shows it
    method(study)                                          the published experiment's method (independent
                                                           variables, metrics, tool and driver, environment)
                                                           from data/reference/methods.csv, as a table

In JupyterLab a table or figure shows its caption under a plain "Table"/"Figure"
label. In the book, the extension ``book/_ext/nvmelab_book.py`` finds the
``data-nvmelab-kind`` marker these helpers write, turns the output into a numbered
Sphinx figure or table (``numfig``), so that ``{numref}`` works, and builds the page
banner and footer from ``declare_sources``.

Every data file a notebook reads is noted in a registry: an audit hook (``sys.addaudithook``)
installed when this module is imported sees each file opened for reading under ``data/`` (and
``build/results/``), whichever loader opened it (pandas, ``json``, the records reader);
``note_used`` adds a file by hand (one read by a subprocess, say). ``declare_used()`` in a
notebook's last code cell glues the set, and the book links and copies every file in it.

Caveat: the book reads the caption from the marker's ``data-nvmelab-caption``
attribute, which holds plain text; markup in a caption is shown as typed.
"""

from __future__ import annotations

import builtins
import html
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The glue key under which a notebook declares its data files (read by the book extension).
SOURCES_KEY = "nvmelab_sources"
#: The glue key under which a notebook lists every data file it read (declare_used; read by the book extension).
USED_KEY = "nvmelab_used"
#: Marker attributes of a captioned output (read by the book extension).
KIND_ATTR = "data-nvmelab-kind"
NAME_ATTR = "data-nvmelab-name"
CAPTION_ATTR = "data-nvmelab-caption"
#: Comments around the caption shown in JupyterLab; the book replaces it with a numbered one.
CAPTION_BEGIN, CAPTION_END = "<!--nvmelab-caption-->", "<!--/nvmelab-caption-->"
#: Shown for a missing value (NaN or None) in a table.
MISSING = "–"
#: Presets whose records are smoke tests, never measurements to quote.
SMOKE_PRESETS = ("quick",)

_NAME_RE = re.compile(r"^[a-z][a-z0-9-]*$")
#: Text cells that are numbers in print ("0.763 ± 0.022", "1,234"): aligned as numbers.
_NUMBER_TEXT_RE = re.compile(r"^[\d.,\s±–+-]*\d[\d.,\s±–+-]*$")


def repo_root() -> Path:
    """The checkout this package lives in (``src/nvmelab/...`` -> repository root)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").is_file() and (parent / "data").is_dir():
            return parent
    return Path.cwd()


def repo_path(path: str | os.PathLike) -> str:
    """`path` relative to the repository root (as the book links it); absolute if outside."""
    p = Path(path).resolve()
    try:
        return p.relative_to(repo_root()).as_posix()
    except ValueError:
        return p.as_posix()


class Declared(dict):
    """What declare_sources/declare_used return: a plain dict that shows nothing when it is the last
    expression of a notebook cell (a chapter must never print a Python dict)."""

    def _ipython_display_(self) -> None:
        pass


# ------------------------------------------------------- data files read ---
#: Absolute paths of the data files this process read (the registry declare_used glues).
_USED: set[str] = set()
#: Re-entry guard of the audit hook (it must not note what its own checks open).
_IN_HOOK = False


def _data_roots() -> tuple[str, ...]:
    roots = [repo_root() / "data", repo_root() / "build" / "results"]
    if os.environ.get("NVMELAB_DATA"):
        roots.append(Path(os.environ["NVMELAB_DATA"]))
    out: list[str] = []
    for r in roots:
        for form in (os.path.abspath(r), os.path.realpath(r)):
            if form + os.sep not in out:
                out.append(form + os.sep)
    return tuple(out)


_ROOTS = _data_roots()


def _reads_only(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return not any(c in mode for c in "wax+")
    return isinstance(flags, int) and flags & os.O_ACCMODE == os.O_RDONLY


def _audit(event: str, args: tuple) -> None:
    """sys audit hook: note every data file opened for reading (see the module docstring)."""
    global _IN_HOOK
    if event != "open" or _IN_HOOK:
        return
    _IN_HOOK = True
    try:
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if isinstance(path, (str, os.PathLike)) and _reads_only(mode, flags):
            full = os.path.abspath(os.fspath(path))
            if full.startswith(_ROOTS) and not full.endswith(".lock"):
                _USED.add(full)
    except Exception:  # noqa: BLE001 - an audit hook must never break the open it watches
        pass
    finally:
        _IN_HOOK = False


if not getattr(builtins, "_nvmelab_used_hook", False):  # once per process, even after a reload
    sys.addaudithook(_audit)
    builtins._nvmelab_used_hook = True  # type: ignore[attr-defined]


def note_used(*paths: str | os.PathLike) -> None:
    """Add data files to the registry by hand (the audit hook notes what this process opens itself)."""
    for p in paths:
        _USED.add(os.path.abspath(os.fspath(p)))


def used_files() -> list[str]:
    """The data files read so far (files that still exist), repository-relative, sorted."""
    return sorted({repo_path(p) for p in _USED if os.path.isfile(p)})


def _kind(rel: str) -> str:
    """Where a data file belongs on the banner: published, records (our JSONL) or data (anything else)."""
    if rel.startswith("data/reference/") or "/reference/" in rel:
        return "published"
    if rel.endswith(".jsonl"):
        return "records"
    return "data"


def declare_used(*extra: str | os.PathLike, glue: bool = True) -> dict[str, list[str]]:
    """Glue every data file this notebook read (the registry, plus `extra`) under ``USED_KEY``, split
    into ``records``, ``published`` and ``data``; call it in the notebook's last code cell. The book
    lists them on the banner, links them in the footer and copies them into the site."""
    note_used(*extra)
    decl = Declared(records=[], published=[], data=[])
    for rel in used_files():
        decl[_kind(rel)].append(rel)
    if glue:
        _glue_json(USED_KEY, decl)
    return decl


def _glue_json(key: str, value: Any) -> None:
    """Glue `value` as JSON under `key` for the book extension (nothing outside a MyST-NB environment)."""
    try:
        from myst_nb import glue
    except ImportError:
        return
    glue(key, json.dumps(value), display=False)


# ------------------------------------------------------------------ numbers ---
def _auto_format(values: Sequence[float], integer: bool = False) -> str:
    """A format spec for a column: whole numbers for integers and for magnitudes of 1000 and more,
    else as many decimals as make three significant digits at the column's largest value."""
    finite = [abs(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if integer or not finite:
        return ",.0f"
    top = max(finite)
    if top >= 1000:
        return ",.0f"
    if top >= 100:
        return ",.1f"
    if top >= 1:
        return ",.2f"
    return ",.3f"


#: A number printed in scientific notation ("4.19e+07"): never shown on a page.
_EXPONENT_RE = re.compile(r"^([-+]?)(\d[\d,]*(?:\.\d+)?)[eE]([-+]?\d+)$")


def plain_number(text: str) -> str:
    """`text` without scientific notation: "4.19e+07" -> "41,900,000", "1.5e-05" -> "0.000015";
    the digits shown are the ones the notation had (anything else is returned as it was)."""
    m = _EXPONENT_RE.match(text.strip())
    if not m:
        return text
    sign, mant, exp = m.group(1), m.group(2).replace(",", ""), int(m.group(3))
    decimals = len(mant.partition(".")[2])
    value = float(mant) * 10.0**exp
    return sign + format(value, f",.{max(0, decimals - exp)}f")


def format_number(value: Any, fmt: str | None = None) -> str:
    """A number as a table shows it: thousands separators, `fmt` (a format spec) or an automatic one;
    never in scientific notation (a `g` format that would print "4.19e+07" prints "41,900,000")."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    if not isinstance(value, (int, float)):
        return str(value)
    return plain_number(format(value, fmt or _auto_format([value], integer=isinstance(value, int))))


# ------------------------------------------------------------------- output ---
@dataclass
class Captioned:
    """HTML with a caption, marked for the book (see the module docstring)."""

    kind: str  # "figure" or "table"
    body: str  # the HTML of the chart or table
    caption: str
    name: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("figure", "table"):
            raise ValueError(f"kind must be 'figure' or 'table', not {self.kind!r}")
        if not self.caption.strip():
            raise ValueError("a caption is required")
        if self.name is not None and not _NAME_RE.match(self.name):
            raise ValueError(f"name {self.name!r}: use lower-case letters, digits and '-', starting with a letter")

    def _repr_html_(self) -> str:
        label = "Figure" if self.kind == "figure" else "Table"
        cap = (
            f'{CAPTION_BEGIN}<p class="nvmelab-caption"><strong>{label}.</strong> '
            f"{html.escape(self.caption)}</p>{CAPTION_END}"
        )
        attrs = f'class="nvmelab-captioned nvmelab-{self.kind}" {KIND_ATTR}="{self.kind}"'
        if self.name:
            attrs += f' {NAME_ATTR}="{html.escape(self.name)}"'
        attrs += f' {CAPTION_ATTR}="{html.escape(self.caption, quote=True)}"'
        inner = cap + self.body if self.kind == "table" else self.body + cap
        return f"<div {attrs}>\n{inner}\n</div>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": self._repr_html_(), "text/plain": f"{self.kind}: {self.caption}"}


def _chart_html(chart: Any) -> str:
    if isinstance(chart, str):
        return chart
    if hasattr(chart, "_repr_mimebundle_"):
        bundle = chart._repr_mimebundle_()
        if isinstance(bundle, tuple):
            bundle = bundle[0]
        if "text/html" in bundle:
            return bundle["text/html"]
    if hasattr(chart, "_repr_html_"):
        return chart._repr_html_()
    raise TypeError(f"{type(chart).__name__} has no HTML form to show as a figure")


def figure(chart: Any, caption: str, *, name: str | None = None) -> Captioned:
    """`chart` (Altair or anything with an HTML form) with a caption; the book numbers it."""
    return Captioned("figure", _chart_html(chart), caption, name)


def table(
    df: Any,
    caption: str,
    *,
    name: str | None = None,
    units: Mapping[str, str] | None = None,
    formats: Mapping[str, str] | None = None,
    columns: Mapping[str, str] | None = None,
    index: bool = False,
) -> Captioned:
    """`df` as an HTML table: `columns` renames headers, `units` adds "(unit)" to them, `formats`
    gives a format spec per column (else one is chosen per column from its magnitude, always with
    thousands separators). With `index`, the index levels become the first columns. Two-level
    column labels (``pd.concat({...}, axis=1)``) give a grouped header: the group over its columns;
    `units`, `formats` and `columns` then refer to the second level."""
    import pandas as pd

    d = df.reset_index() if index else df
    if isinstance(d.columns, pd.MultiIndex):
        if d.columns.nlevels != 2:
            raise ValueError("table: at most two levels of column labels")
        groups = [str(a) for a, _ in d.columns]
        keys = [str(b) if str(b) else str(a) for a, b in d.columns]
        groups = [g if str(b) else "" for g, (_, b) in zip(groups, d.columns)]  # index columns: no group
    else:
        groups = None
        keys = [str(c) for c in d.columns]
    units = dict(units or {})
    formats = dict(formats or {})
    columns = dict(columns or {})
    unknown = (set(units) | set(formats) | set(columns)) - set(keys)
    if unknown:
        raise KeyError(f"table: no column(s) {sorted(unknown)} in {keys}")
    heads, cells, numeric = [], [], []
    for i, key in enumerate(keys):
        title = columns.get(key, key)
        if units.get(key):
            title += f" ({units[key]})"
        heads.append(title)
        series = d.iloc[:, i]
        is_num = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
        numeric.append(is_num)
        fmt = formats.get(key) or (
            _auto_format(list(series.astype(float)), integer=pd.api.types.is_integer_dtype(series)) if is_num else None
        )
        cells.append([format_number(v, fmt) if is_num else ("" if v is None else str(v)) for v in series])
    cls = [
        "num" if n or (col and all(_NUMBER_TEXT_RE.match(v) or v in ("", MISSING) for v in col)) else "text"
        for n, col in zip(numeric, cells)
    ]
    out = ['<table class="nvmelab-results">', "<thead>"]
    if groups:
        out.append("<tr>")
        i = 0
        while i < len(groups):
            j = i
            while j + 1 < len(groups) and groups[j + 1] == groups[i] and groups[i]:
                j += 1
            if groups[i]:
                out.append(f'<th class="group" colspan="{j - i + 1}">{html.escape(groups[i])}</th>')
            else:
                out.append(f'<th class="{cls[i]}" rowspan="2">{html.escape(heads[i])}</th>')
            i = j + 1
        out.append("</tr>")
    out.append("<tr>")
    out += [f'<th class="{c}">{html.escape(h)}</th>' for h, c, g in zip(heads, cls, groups or [" "] * len(heads)) if g]
    out.append("</tr></thead>")
    out.append("<tbody>")
    for r in range(len(d)):
        out.append(
            "<tr>" + "".join(f'<td class="{c}">{html.escape(col[r])}</td>' for col, c in zip(cells, cls)) + "</tr>"
        )
    out.append("</tbody></table>")
    return Captioned("table", "\n".join(out), caption, name)


# ------------------------------------------------------------------ sources ---
def declare_sources(
    *, records: Iterable[str | os.PathLike] = (), published: Iterable[str | os.PathLike] = (), glue: bool = True
) -> dict[str, list[str]]:
    """Declare the data files a study page shows: `records` (our JSONL files) and `published`
    (files under data/reference). In a book build the list is glued under ``SOURCES_KEY``; the
    extension turns it into the page banner (from the records' provenance) and the footer links.
    Returns the declaration; outside a book build nothing else happens."""
    decl = Declared(
        records=sorted({repo_path(p) for p in records}), published=sorted({repo_path(p) for p in published})
    )
    for p in decl["records"] + decl["published"]:
        full = Path(p) if Path(p).is_absolute() else repo_root() / p
        if not full.is_file():
            raise FileNotFoundError(f"declare_sources: {p} does not exist")
        note_used(full)
    if glue:
        _glue_json(SOURCES_KEY, decl)
    return decl


@dataclass
class RecordSource:
    """What one records file says about itself (from every record's provenance)."""

    path: str
    records: int = 0
    hosts: list[str] = field(default_factory=list)
    presets: list[str] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    first_utc: str | None = None
    last_utc: str | None = None
    emulation: list[str] = field(default_factory=list)
    #: Per run without stress: what the rest of the host used (host_cpu_usage - cpu_usage),
    #: percent of one CPU; empty for records taken before the runner measured it.
    other_load: list[float] = field(default_factory=list)

    @property
    def smoke_test(self) -> bool:
        return any(p in SMOKE_PRESETS for p in self.presets)

    def quiet(self) -> str | None:
        """'the rest of the host used a median 0.4 % of a CPU (max 3.1 %)', or None when unknown.

        "The rest" is everything beside the measured engine (and the server of a served controller, the run's
        device) during the run: other processes, and this process's own work around the timed window
        (provenance, image checks)."""
        if not self.other_load:
            return None
        v = sorted(self.other_load)
        mid = len(v) // 2
        median = v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2
        return f"the rest of the host used a median {median:.1f} % of a CPU (max {v[-1]:.1f} %)"

    def dates(self) -> str:
        if not self.first_utc:
            return "unknown"
        a, b = self.first_utc[:10], (self.last_utc or self.first_utc)[:10]
        return a if a == b else f"{a} to {b}"

    def summary(self) -> str:
        """One line: '<n> records, host vm, preset standard, 2026-11-22, commit 007577dc2ca8'."""
        parts = [
            f"{self.records:,} records",
            "host " + (", ".join(self.hosts) or "unknown"),
            "preset " + (", ".join(self.presets) or "unknown"),
            f"measured {self.dates()}",
            ("commit " if len(self.commits) <= 1 else "commits ") + (", ".join(self.commits) or "unknown"),
        ]
        if self.emulation:
            parts.append("emulated " + ", ".join(self.emulation))
        if self.quiet():
            parts.append(self.quiet())
        return ", ".join(parts)


def _add(seen: list[str], value: Any) -> None:
    if value not in (None, "") and str(value) not in seen:
        seen.append(str(value))


def _device_usage(rec: dict[str, Any]) -> float:
    """The CPU (percent of one) a record's emulated device used beside the measured stack, where the record
    says (study tool_costs): the served controller's process, or the in-process emulator's service thread
    (the engine process's use beyond its own threads); 0 otherwise."""
    served = rec.get("server_cpu_usage")
    if isinstance(served, (int, float)):
        return float(served)
    proc, own = rec.get("process_cpu_usage"), rec.get("cpu_usage")
    if rec.get("via") == "in-process" and isinstance(proc, (int, float)) and isinstance(own, (int, float)):
        return max(0.0, float(proc) - float(own))
    return 0.0


def describe_records(paths: Iterable[str | os.PathLike], *, commit_chars: int = 12) -> list[RecordSource]:
    """Per records file: count, hosts, presets (the record's ``preset`` or the file name), dates,
    git commits and emulated profiles, read from the records' provenance. Nothing is guessed:
    a field no record names stays empty."""
    out = []
    for p in paths:
        full = Path(p) if Path(p).is_absolute() else repo_root() / p
        src = RecordSource(repo_path(full))
        with open(full, encoding="utf-8") as f:
            lines = [ln for ln in f if ln.strip()]
        for n, line in enumerate(lines, 1):
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{src.path}:{n}: not a JSON record ({exc})") from None
            prov = rec.get("provenance") or {}
            src.records += 1
            # in the results layout (data/results/<study>/<host>/) the folder names the machine: a hostname may
            # be shared (the GPU lease's host and the development VM were both "vm")
            folder = full.parent.name if full.parent.parent.parent.name == "results" else None
            _add(src.hosts, folder or prov.get("host"))
            if folder and prov.get("host") and folder != prov.get("host"):
                _add(src.hosts, f"hostname {prov.get('host')}")
            _add(src.presets, rec.get("preset") or full.stem)
            commit = prov.get("git_commit")
            if commit:
                dirty = commit.endswith("+dirty")
                _add(src.commits, commit.removesuffix("+dirty")[:commit_chars] + ("+dirty" if dirty else ""))
            utc = prov.get("utc")
            if utc:
                src.first_utc = min(src.first_utc or utc, utc)
                src.last_utc = max(src.last_utc or utc, utc)
            used, own = rec.get("host_cpu_usage"), rec.get("cpu_usage")
            if isinstance(used, (int, float)) and isinstance(own, (int, float)) and not rec.get("stress"):
                src.other_load.append(max(0.0, float(used) - float(own) - _device_usage(rec)))
            if prov.get("profile"):
                scale = prov.get("scale")
                _add(
                    src.emulation,
                    f"{prov['profile']} (scale {scale:g})" if isinstance(scale, (int, float)) else str(prov["profile"]),
                )
        out.append(src)
    return out


# ------------------------------------------------------------------ method ---
#: The published method of every study, one row per variable, metric, tool or environment fact.
METHODS_FILE = "methods.csv"
#: Order of the method's aspects on a page.
METHOD_ASPECTS = ("independent variable", "metric", "tool and driver", "environment")


def method(study: str) -> Captioned:
    """The method of the published experiment a study page reproduces, as its source states it
    (``data/reference/methods.csv``: independent variables, metrics, tool and driver, environment,
    each row with the seed or published page it comes from), as a captioned table. A study
    without rows, or a row of an unknown aspect, is an error."""
    import pandas as pd

    path = repo_root() / "data" / "reference" / METHODS_FILE
    df = pd.read_csv(path, dtype=str).fillna("")
    bad = sorted(set(df["aspect"]) - set(METHOD_ASPECTS))
    if bad:
        raise ValueError(f"{repo_path(path)}: unknown aspect(s) {bad}; known: {list(METHOD_ASPECTS)}")
    rows = df[df["study"] == study].copy()
    if rows.empty:
        raise KeyError(f"{repo_path(path)} has no method rows for study {study!r}")
    rows["order"] = rows["aspect"].map(METHOD_ASPECTS.index)
    rows = rows.sort_values("order", kind="stable")
    sources = ", ".join(dict.fromkeys(rows["source"]))
    return table(
        rows[["aspect", "item", "published", "source"]],
        f"Method of the published experiment, as its source states it ({sources}): independent variables, "
        f"metrics, tool and driver, environment.",
        name=f"tab-{study.replace('_', '-')}-method",
        columns={"aspect": "Aspect", "item": "What", "published": "Published set-up", "source": "Source"},
    )


# ------------------------------------------------------------ glued values ---
def glue_values(values: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Glue each scalar of `values` under ``prefix + key`` for a chapter's prose (myst_nb.glue,
    not displayed): numbers as numbers, strings as Markdown (for ``{glue:md}``). Lists and other
    values are left out. Returns the keys glued; outside a MyST-NB environment nothing is glued
    and the keys are returned all the same."""
    keys = []
    try:
        from myst_nb import glue as _glue
    except ImportError:
        _glue = None
    for k, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            continue
        keys.append(prefix + k)
        if _glue is None:
            continue
        if isinstance(v, str):
            from IPython.display import Markdown

            _glue(prefix + k, Markdown(v), display=False)
        else:
            _glue(prefix + k, v, display=False)
    return keys


def values_table(values: Mapping[str, Any], fmt: str = ",.3g"):
    """`values` as a DataFrame (quantity, value as text) for publication.table: floats with `fmt`
    (never in scientific notation), lists left out."""
    import pandas as pd

    items = [(k, v) for k, v in values.items() if not isinstance(v, (list, tuple, dict))]
    return pd.DataFrame(
        {
            "quantity": [k for k, _ in items],
            "value": [format_number(v, fmt if isinstance(v, float) else None) for _, v in items],
        }
    )
