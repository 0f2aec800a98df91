"""Sphinx configuration of the nvmelab book (MyST-NB + sphinx-book-theme).

How the book is put together (see book/README.md for the reasoning):

* Chapters are MyST markdown files in this directory; the study chapters are the
  notebooks themselves, reached through the symlink ``book/notebooks -> ../notebooks``
  (nothing is copied). ``STUDIES`` below lists them in book order with their labels.
  A study whose notebook does not exist yet is shown by ``placeholders/<stem>.md``,
  a page that says so plainly; the extension ``_ext/nvmelab_book.py`` picks the
  notebook or the placeholder at build time and fills the study toctree.
* Notebooks run through jupyter-cache (``nb_execution_mode = "cache"``). The cache
  lives in ``book/.jupyter_cache/<preset>`` so a notebook executed under the quick
  preset is never reused for the standard one. The preset comes from the
  ``NVMELAB_PRESET`` environment variable (the Makefile sets it); the kernel inherits it.
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
]

# --- which study is which notebook (book order); read by _ext/nvmelab_book.py ---
#: (notebook stem under notebooks/, label on the chapter heading, chapter title)
STUDIES = [
    ("cpu_initiated", "sec-experiments-cpu-initiated", "CPU-initiated I/O: parameter search"),
    ("tool_comparison", "sec-experiments-tool-comparison", "I/O stack comparison"),
    ("pcie_saturation", "sec-experiments-pcie-bandwidth", "PCIe bandwidth saturation"),
    ("cuda_iosize", "sec-experiments-cuda-iosize", "Device-initiated I/O: I/O size scaling"),
    ("cuda_qdepth", "sec-experiments-cuda-qdepth", "Device-initiated I/O: queue depth scaling"),
    ("blksum_qdepth", "sec-experiments-blksum-qdepth", "Block-image checksum: queue depth"),
    ("vram_cache", "sec-experiments-vram-cache", "NVMe RAID-0 with a GPU-memory cache"),
]
nvmelab_studies = STUDIES
nvmelab_results_dir = str(HERE.parent / "data" / "results")

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
# A placeholder is dropped once its notebook exists (no orphan page, no duplicate label).
exclude_patterns += [
    f"placeholders/{stem}.md" for stem, _, _ in STUDIES if (HERE / "notebooks" / f"{stem}.ipynb").exists()
]
myst_enable_extensions = ["colon_fence", "deflist", "substitution", "attrs_inline"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]  # notebooks may start below an H1 after their label cell

# --- notebook execution (MyST-NB + jupyter-cache) ---
PRESET = os.environ.setdefault("NVMELAB_PRESET", "quick")  # exported: the notebook kernels inherit it
#: NVMELAB_BOOK_CACHE: another jupyter-cache root (tests and cold-build timing use a fresh one).
CACHE_ROOT = Path(os.environ.get("NVMELAB_BOOK_CACHE") or HERE / ".jupyter_cache")
#: Longest a single cell may run, per preset (seconds). `standard` sweeps on the
#: emulator take minutes per study on 2 cores; `paper` is meant for real hardware.
CELL_TIMEOUT_S = {"quick": 600, "standard": 3600, "paper": -1}
nb_execution_mode = os.environ.get("NVMELAB_BOOK_EXECUTE", "cache")
nb_execution_cache_path = str(CACHE_ROOT / PRESET)
nb_execution_timeout = CELL_TIMEOUT_S.get(PRESET, CELL_TIMEOUT_S["standard"])
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_excludepatterns = ["placeholders/*"]
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
# outputs of nvmelab.publication.figure/table become such nodes (see _ext/nvmelab_book.py).
numfig = True
numfig_format = {"figure": "Figure %s", "table": "Table %s", "code-block": "Listing %s", "section": "Section %s"}
