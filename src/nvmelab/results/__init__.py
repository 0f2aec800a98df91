# SPDX-License-Identifier: BSD-3-Clause
"""Results: records (format, atomic files), published reference data, analysis, figures, and
how results appear in the book (publication, environments)."""
