# SPDX-License-Identifier: BSD-3-Clause
"""The ``{nvmelab-answer}`` directive: the book's side-by-side answer (nvmelab.book.answer).

One table, one row per ceiling and initiator (threads, queues, drives, what the initiator costs, the
status of the numbers, the caveat), then what the table cannot say yet. Every data file the table reads
is linked from the page footer (nvmelab_book.note_data_file). Option ``:unknowns:`` (flag) adds the list
of open points under the table.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from nvmelab_book import _table, note_data_file
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

WIDTHS = [3, 4, 3, 3, 4]
#: The device-initiated study whose records of ours join the table.
GPU_STUDY = "cuda_qdepth"
#: The study of each CPU stack's cost per I/O (SPDK's tools and ours on one served controller).
CPU_STUDY = "tool_costs"


class AnswerDirective(SphinxDirective):
    has_content = False
    option_spec = {"unknowns": directives.flag}

    def run(self) -> list[nodes.Node]:
        from nvmelab.book import answer
        from nvmelab.studies import load_gpu_results, load_spec, study_results

        want = os.environ.get("NVMELAB_PRESET", "standard")
        runs, preset, files = load_gpu_results(GPU_STUDY, want)
        costs, _ = study_results(CPU_STUDY, want, mode="never", progress=False)
        cpu_files = sorted({Path(p) for p in costs.get("results_path", [])})
        for f in answer.sources([*files, *cpu_files]):
            note_data_file(self.env, f)
        rows = answer.rows(runs, load_spec(GPU_STUDY).target, preset, costs, want)
        table = _table(answer.SHOWN, [answer.shown(r) for r in rows], WIDTHS)
        table["classes"] += ["colwidths-given", "nvmelab-answer"]
        tbody = next(iter(table.findall(nodes.tbody)))
        body = list(tbody.children)
        tbody.clear()
        ceiling = None
        for row, r in zip(body, rows):
            if r["ceiling"] != ceiling:  # a heading row per ceiling, spanning the table
                ceiling = r["ceiling"]
                para = nodes.paragraph("", "", nodes.strong(text=ceiling))
                entry = nodes.entry("", para, morecols=len(answer.SHOWN) - 1)
                tbody += nodes.row("", entry, classes=["nvmelab-answer-ceiling"])
            tbody += row
        out: list[nodes.Node] = [table]
        if "unknowns" in self.options:
            para = nodes.paragraph()
            para += nodes.strong(text="Not known yet. ")
            out.append(para)
            items = nodes.bullet_list()
            for text in answer.unknowns():
                li = nodes.list_item()
                li += nodes.paragraph(text=text)
                items += li
            out.append(items)
        return out


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("nvmelab-answer", AnswerDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
