# SPDX-License-Identifier: BSD-3-Clause
"""Sphinx configuration of the nvmelab book (MyST-NB + sphinx-book-theme).

How the book is put together (see book/README.md for the reasoning):

* Chapters are MyST markdown files in this directory; the study chapters are the
  notebooks themselves, reached through the symlink ``book/notebooks -> ../notebooks``
  (nothing is copied). ``STUDIES`` below is read from the study specs
  (``src/nvmelab/studies/*/spec.toml``: study, ``label``, ``title``, in ``order``);
  every study has a notebook of the same name, and the extension
  ``_ext/nvmelab_book.py`` fills the study toctree from the list.
* The book publishes measured records. ``NVMELAB_PRESET`` (default ``standard``) names
  the records every study page shows, and ``NVMELAB_RUN`` (default ``never``) whether a
  notebook may measure: ``never`` shows the committed records under
  ``data/results/<study>/<host>/<preset>.jsonl`` and runs nothing; ``missing`` runs,
  for this host, what its records lack (nvmelab.studies.runner). The ``quick``
  preset is a smoke test (``make test-notebooks``, CI) and is refused here, so no quick
  record feeds a figure or a sentence of the book. Both variables are exported, so the
  notebook kernels inherit them.
* Notebooks run through jupyter-cache (``nb_execution_mode = "cache"``). The cache
  lives in ``book/.jupyter_cache/<preset>-<run mode>`` and is keyed by the notebook's
  code; records that change under it are picked up by a fresh cache (``make clean``)
  or ``NVMELAB_BOOK_EXECUTE=force``.
* The HTML works offline: Vega, Vega-Lite and vega-embed are vendored in
  ``_static/vega/`` and the extension points Altair's chart loader at them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "nvmelab"
author = "the nvmelab authors"
copyright = "the nvmelab authors"  # noqa: A001 (Sphinx's name)
language = "en"

extensions = [
    "myst_nb",
    "sphinxcontrib.bibtex",
    "nvmelab_book",
    "nvmelab_answer",
]

# --- the studies (book order), from the specs; read by _ext/nvmelab_book.py ---
sys.path.insert(0, str(HERE.parent / "src"))  # the package of this checkout (also without an installed venv)
from nvmelab.studies.spec import book_studies  # noqa: E402

#: (notebook stem under notebooks/ = study name, label on the chapter heading, chapter title)
STUDIES = book_studies()
_missing = [stem for stem, _, _ in STUDIES if not (HERE / "notebooks" / f"{stem}.ipynb").exists()]
if _missing:
    raise RuntimeError(f"book: study spec(s) without a notebook: {', '.join(f'notebooks/{m}.ipynb' for m in _missing)}")
nvmelab_studies = STUDIES
nvmelab_results_dir = str(HERE.parent / "data" / "results")
#: {result} keys that a notebook may leave unglued for now ("notebooks/<stem>::key": why). Each shows a
#: visible "not available" marker, never a sentence in its place; every other missing result fails the build.
nvmelab_results_pending: dict[str, str] = {}

# --- sources ---
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = [
    "_build",
    ".jupyter_cache",
    "README.md",
    "**/.ipynb_checkpoints",
    "notebooks/README.md",
    "notebooks/**/*.py",
]
myst_enable_extensions = ["colon_fence", "deflist", "substitution", "attrs_inline"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]  # notebooks may start below an H1 after their label cell
#: Smart quotes and ellipses, but no dash conversion: a command-line flag written --queue-depth in prose or a
#: caption must not turn into an en dash ("–queue-depth").
smartquotes_action = "qe"

# --- notebook execution (MyST-NB + jupyter-cache) ---
#: Presets whose records are smoke tests: the book refuses to build from them.
SMOKE_PRESETS = ("quick",)
PRESET = os.environ.setdefault("NVMELAB_PRESET", "standard")  # exported: the notebook kernels inherit it
RUN_MODE = os.environ.setdefault("NVMELAB_RUN", "never")  # never | missing (| auto); exported likewise
if PRESET in SMOKE_PRESETS:
    raise RuntimeError(
        f"book: NVMELAB_PRESET={PRESET} is a smoke test whose records are never published; build the book "
        "from measured records (make book, NVMELAB_PRESET=standard or paper) and run the quick preset with "
        "make test-notebooks"
    )
from nvmelab.studies.runner import run_mode  # noqa: E402

run_mode(RUN_MODE)  # an unknown NVMELAB_RUN is an error here, not in seven notebooks
#: NVMELAB_BOOK_CACHE: another jupyter-cache root (tests and cold-build timing use a fresh one).
CACHE_ROOT = Path(os.environ.get("NVMELAB_BOOK_CACHE") or HERE / ".jupyter_cache")
#: Longest a single cell may run, per preset (seconds). `standard` sweeps on the
#: emulator take minutes per study on 2 cores; `paper` is meant for real hardware.
CELL_TIMEOUT_S = {"quick": 600, "standard": 3600, "paper": -1}
nb_execution_mode = os.environ.get("NVMELAB_BOOK_EXECUTE", "cache")
nb_execution_cache_path = str(CACHE_ROOT / f"{PRESET}-{RUN_MODE}")
nb_execution_timeout = CELL_TIMEOUT_S.get(PRESET, CELL_TIMEOUT_S["standard"])
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_kernel_rgx_aliases = {".*": "python3"}  # any Python kernel name runs on this environment's kernel
nb_output_stderr = "remove-warn"
nb_merge_streams = True

# --- bibliography ---
bibtex_bibfiles = ["references.bib"]
bibtex_default_style = "plain"
bibtex_reference_style = "author_year"

# --- HTML ---
html_theme = "sphinx_book_theme"
html_title = "nvmelab"
html_static_path = ["_static"]
templates_path = ["_templates"]
html_css_files = ["nvmelab.css"]
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "navigation_with_keys": False,
    # the build stamp and this page's data files (_templates/nvmelab-footer.html, filled by the extension)
    "footer_content_items": ["copyright.html", "nvmelab-footer.html"],
}
html_last_updated_fmt = None
# an explicit colour mode: without it the theme logs a console error on first load
html_context = {"default_mode": "auto"}
html_copy_source = False
# No page may pull code from the network. Sphinx adds MathJax (from a CDN) only to a
# page that holds math; the book has none, and tests/book fails if one appears.

nitpicky = True
# Figures and results tables are numbered book-wide (the study toctree is not numbered);
# outputs of nvmelab.book.publication.figure/table become such nodes (see _ext/nvmelab_book.py).
numfig = True
numfig_format = {"figure": "Figure %s", "table": "Table %s", "code-block": "Listing %s", "section": "Section %s"}
