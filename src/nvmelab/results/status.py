# SPDX-License-Identifier: BSD-3-Clause
"""The book's one status vocabulary: what every number of ours or of the published sources is.

Every claim in the book carries one of these words (issue 34): the chapters, the coverage page
(nvmelab.book.coverage), the answer table (nvmelab.book.answer), the emulated sweeps' verdicts
(nvmelab.studies.cpu_submit.analysis) and the model's scoring (nvmelab.results.model_validation) import them
from here, so no module types a status of its own.

Key names:
    STATUSES                  every status word and its one-line meaning
    ORIGINS                   the origin classes of a published number
    published(origin)         the status ``published — <origin>`` (an unknown origin is an error)
    HITS                      the statuses that let a sentence claim agreement with a published number
"""

from __future__ import annotations

MEASURED = "measured here"
EMULATED = "emulated"
EMU_RESTATES = "emulated — restates an input"
EMU_DISAGREES = "emulated — disagrees"
MODEL_HIT = "model hit"
MODEL_MISS = "model miss"
CALIBRATION = "calibration input"
PUBLISHED = "published"
NOT_TESTABLE = "not testable here"

#: Every status word and its one-line meaning (shown on the coverage page).
STATUSES = {
    MEASURED: "our own runs on this book's hosts measure the same quantity",
    EMULATED: "our runs drive emulated NVMe controllers; the note says what the device profile encodes",
    EMU_RESTATES: "an emulated result that equals a number the profile was given (an input times the scale)",
    EMU_DISAGREES: "an emulated result set beside the published one that differs from it",
    MODEL_HIT: "the analytical model, fitted elsewhere, predicts the held-out fact within the miss threshold",
    MODEL_MISS: "the model's prediction of the held-out fact is off by more than the miss threshold",
    CALIBRATION: "the model or profile was fitted to it (or it restates a fitted number): it tests nothing",
    PUBLISHED: "shown as the source states it, not tested here",
    NOT_TESTABLE: "needs hardware or host control this book's hosts lack; the note says why",
}
#: The origin classes of a published number (status ``published — <origin>``).
ORIGINS = {
    "per-run records at a commit": "computed from the published per-run result files",
    "text of a seed": "stated in a seed's text",
    "text of a later revision": "stated in a later revision of the published pages",
    "plot drawn from synthetic data": "read off a published figure drawn from synthetic result files",
}
#: Statuses that let a sentence say a result agrees with a published one.
HITS = (MODEL_HIT, MEASURED)


def published(origin: str) -> str:
    """``published — <origin>`` for one of ORIGINS."""
    if origin not in ORIGINS:
        raise KeyError(f"published origin {origin!r} is not one of {sorted(ORIGINS)}")
    return f"{PUBLISHED} — {origin}"
