# SPDX-License-Identifier: BSD-3-Clause
"""Benchmarks (`make bench`): each tests/bench/bench_*.py module has run(outdir) -> dict.

The harness (`python -m tests.bench`) runs them and writes one JSON file per
benchmark under data/results/bench/<host>/<name>.json with the measured numbers,
the goal, whether it was met, and the environment. Benchmarks are not timed
tests: nothing fails when a goal is missed; the JSON says so.

A module that sets GPU = True is a GPU benchmark (selected with --gpu).
"""
