# SPDX-License-Identifier: BSD-3-Clause
"""The pcie_saturation study's figures (payload and link-overhead bars per I/O size, with the line-rate and P2P
rules); moved from nvmelab.results.plots, which keeps the plot style and the helpers every study shares."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from ...results.plot_style import DASHES, HEIGHT, TITLES, WIDTH, title_lines


def pcie_saturation(
    agg: pd.DataFrame,
    *,
    line_rate_gbps: float | None = None,
    p2p_gbps: float | None = None,
    title: str = "",
    references: Sequence[tuple[str, float]] = (),
) -> alt.LayerChart:
    """Stacked bars per I/O size: payload GB/s plus the extra bytes the link carried (DCGM - payload).

    Without DCGM numbers (our emulated runs) the bars hold the payload only.
    Rules: the PCIe line rate and the P2P reference bandwidth, when given, and any other
    (label, GB/s) in `references` (e.g. an emulated profile's payload ceiling), each with its own dash.
    """
    rows = []
    for _, r in agg.iterrows():
        rows.append(
            {
                "iosize": int(r["iosize"]),
                "part": "payload (application)",
                "gbps": r["gbps_mean"],
                "order": 0,
                "total": r.get("dcgm_gbps_mean", r["gbps_mean"]),
            }
        )
        dc = r.get("dcgm_gbps_mean")
        if dc is not None and dc == dc:
            rows.append(
                {
                    "iosize": int(r["iosize"]),
                    "part": "link overhead (DCGM - payload)",
                    "gbps": dc - r["gbps_mean"],
                    "order": 1,
                    "total": dc,
                }
            )
    d = pd.DataFrame(rows)
    tips = [
        alt.Tooltip("iosize:O", title="I/O size"),
        alt.Tooltip("part:N"),
        alt.Tooltip("gbps:Q", title="GB/s", format=".2f"),
        alt.Tooltip("total:Q", title="link total GB/s", format=".2f"),
    ]
    bars = (
        alt.Chart(d)
        .mark_bar()
        .encode(
            x=alt.X("iosize:O", title=TITLES["iosize"], axis=alt.Axis(labelAngle=0)),
            y=alt.Y("gbps:Q", title="GB/s", stack="zero"),
            color=alt.Color(
                "part:N",
                title="Bytes",
                sort=["payload (application)", "link overhead (DCGM - payload)"],
                legend=alt.Legend(orient="bottom", direction="vertical"),
            ),
            order=alt.Order("order:Q"),
            tooltip=tips,
        )
    )
    layers: list = [bars]
    refs = [(n, v) for n, v in (("PCIe line rate", line_rate_gbps), ("P2P reference", p2p_gbps)) if v is not None]
    refs += [(n, v) for n, v in references]
    if refs:
        rd = pd.DataFrame({"reference": [n for n, _ in refs], "gbps": [float(v) for _, v in refs]})
        names = list(rd["reference"])
        layers.append(
            alt.Chart(rd)
            .mark_rule(color="black", strokeWidth=1.5)
            .encode(
                y="gbps:Q",
                strokeDash=alt.StrokeDash(
                    "reference:N",
                    title="Reference",
                    sort=names,
                    legend=alt.Legend(orient="bottom", direction="vertical"),
                    scale=alt.Scale(domain=names, range=DASHES[1 : 1 + len(names)]),
                ),
                tooltip=[alt.Tooltip("reference:N"), alt.Tooltip("gbps:Q", format=".1f")],
            )
        )
    return alt.layer(*layers).properties(width=WIDTH, height=HEIGHT, title=title_lines(title))
