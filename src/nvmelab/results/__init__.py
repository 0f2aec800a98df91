# SPDX-License-Identifier: BSD-3-Clause
"""Results: what every study shares -- records (format, atomic files), published reference data, checks,
status words, aggregation (analysis), plot style and generic plot helpers, bench. A study's own analysis
and figures live in its folder (nvmelab.studies.<name>); book rendering in nvmelab.book."""
