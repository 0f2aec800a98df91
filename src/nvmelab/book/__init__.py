# SPDX-License-Identifier: BSD-3-Clause
"""How results appear in the book: publication (tables, figures, declared and used data files), coverage (the
seed statements' status from data), answer (the side-by-side answer table), environments (the hosts behind
the records). Above the studies layer: it reads their analysis; nothing below imports it."""
