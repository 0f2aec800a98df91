# SPDX-License-Identifier: BSD-3-Clause
"""No sentence of the book claims agreement its status does not carry (issue 34, "What to build" 2).

Scans the prose of book/*.md and of notebooks/*.ipynb (markdown cells, and the string literals of code
cells, which become captions, tables and sentences, save the messages of assert and raise) for sentences
that say a result has "the same shape" (or its, their shape) as another, "reproduces", "agrees", "matches",
"repeats the <curve, result, ...>" or is "consistent with" it. Each such sentence
must either be negated before the claim word in its own clause (not, no, never, cannot, unlike, ...), be
qualified anywhere in it (disagrees, by construction, restates an input, calibration input) or name a status of
the book's vocabulary that lets it say so (nvmelab.book.coverage.HITS: ``model hit``, ``measured
here``). Terms of art that contain these words (completion matching, a phase tag that matches) are in
TERMS_OF_ART and removed before the scan. Inline code, roles, links' targets and fenced code are not prose
and are skipped. A failure prints every offending file and sentence.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from nvmelab.book import coverage

ROOT = Path(__file__).resolve().parents[1]
#: Words that claim agreement (issue 34): a sentence holding one needs a negation or a hit status.
CLAIM = re.compile(
    r"\b(?:the|its|their|same|similar) shapes?\b|\breproduc(?!ib)\w*|\bagree\w*|\bmatch(?:es|ed|ing)?\b|"
    r"\brepeats? the (?:\w+ ){0,2}(?:shape|curve|trend|result|finding|number|behaviou?r|peak|pattern)s?\b|"
    r"\bconsistent with\b",
    re.I,
)
#: A negation or qualification that makes the sentence say the opposite, or less.
NEGATED = re.compile(r"\b(?:not|no|never|nor|neither|nothing|cannot|unlike|without)\b|n't\b", re.I)
#: Words that qualify a claim wherever they stand in its sentence (the agreement is no evidence).
QUALIFIED = re.compile(r"\b(?:disagree\w*|by construction|restates?|calibration input)\b", re.I)
#: Where a clause ends: a negation qualifies a claim word only in the same clause, before it.
CLAUSE = re.compile(r"[;:—()]")
#: A status of the vocabulary that lets a sentence claim agreement.
HIT = re.compile("|".join(re.escape(s) for s in coverage.HITS), re.I)
#: Terms of art that contain a claim word but claim nothing (removed before the scan).
TERMS_OF_ART = re.compile(
    r"completion[- ]matching|matching (?:modes?|strateg\w+|schemes?|kernels?|functions?|by \w+)|"
    r"phase (?:tag )?match\w*|\bmatch\w* (?:to|with) (?:new|its|their|a|the|each) (?:completions?|commands?|ones|entr\w+)\b|"
    r"(?:match|matching) (?:the|a|its|each) (?:completion|command|CID|phase)\w*",
    re.I,
)
#: Fenced directives whose content is prose (every other fence holds code or generated content).
PROSE_FENCES = {"note", "admonition", "warning", "tip", "important", "caution", "seealso", "figure", "margin",
                "sidebar", "dropdown", "topic", "attention", "hint"}  # fmt: skip
FENCE = re.compile(r"^(`{3,}|~{3,}|:{3,})\s*(?:\{([\w-]+)\})?.*$")


def _prose_markdown(text: str) -> str:
    """The markdown without code and generated blocks (a fence's content is kept only for prose directives)."""
    out: list[str] = []
    stack: list[tuple[str, bool]] = []  # (closing fence, holds prose) of the fences we are in
    for line in text.splitlines():
        st = line.strip()
        if stack and st == stack[-1][0]:
            stack.pop()
            continue
        if stack and not stack[-1][1]:
            continue
        m = FENCE.match(st)
        if m:
            stack.append((m.group(1), m.group(2) in PROSE_FENCES))
            continue
        out.append(line)
    return "\n".join(out)


def _clean(text: str) -> str:
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"\{[\w:-]+\}`[^`]*`", "X", text)  # roles: {ref}`...`, {result}`...`
    text = re.sub(r"`[^`]*`", "X", text)  # inline code
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: keep the text
    text = re.sub(r"^\([\w-]+\)=\s*$", " ", text, flags=re.M)  # labels
    text = re.sub(r"^\s*:[\w-]+:.*$", " ", text, flags=re.M)  # directive options
    return text


def _sentences(text: str) -> list[str]:
    units = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*+] |\d+\. |\||#))", _clean(text)):
        block = TERMS_OF_ART.sub(" ", " ".join(block.split()))
        units += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(“\"*_])", block) if s]
    return units


def _code_strings(source: str) -> list[str]:
    src = "\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return []
    out, seen = [], set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assert, ast.Raise)):  # messages of a failing check: not shown as prose
            seen |= {id(n) for n in ast.walk(node)}
        elif isinstance(node, ast.JoinedStr) and id(node) not in seen:
            seen |= {id(n) for n in ast.walk(node)}
            out.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in seen:
            out.append(node.value)
    return [s for s in out if len(s.split()) >= 4]


def prose() -> list[tuple[str, str]]:
    """(file, text) of every piece of prose the book shows."""
    out = []
    for path in sorted((ROOT / "book").glob("*.md")):
        if path.name != "README.md":
            out.append((str(path.relative_to(ROOT)), _prose_markdown(path.read_text(encoding="utf-8"))))
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        name = str(path.relative_to(ROOT))
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            src = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                out.append((name, _prose_markdown(src)))
            elif cell["cell_type"] == "code":
                out += [(name, s) for s in _code_strings(src)]
    return out


def claimed(sentence: str) -> bool:
    """Whether `sentence` claims agreement: a claim word not negated earlier in its own clause, in a sentence
    that neither qualifies it (QUALIFIED) nor names a hit status."""
    if HIT.search(sentence) or QUALIFIED.search(sentence):
        return False
    for m in CLAIM.finditer(sentence):
        clause = CLAUSE.split(sentence[: m.start()])[-1]
        if not NEGATED.search(clause):
            return True
    return False


def claims() -> list[tuple[str, str]]:
    """(file, sentence) of every sentence that claims agreement without a negation or a hit status."""
    return [(name, s) for name, text in prose() for s in _sentences(text) if claimed(s)]


def test_the_scanner_sees_claims_and_lets_negations_and_hits_pass() -> None:
    def flagged(text: str) -> bool:
        return any(claimed(s) for s in _sentences(text))

    assert flagged("The emulated sweep reproduces the shape of the published curve.")
    assert flagged("Ours agrees with seed 004. The rest is fine.")
    assert flagged("It repeats the published trend and is consistent with the seed.")
    assert flagged("Emulated runs have the same shape as the published ones.")
    assert not flagged("Three consequences shape every experiment. A reset repeats the bring-up.")
    assert not flagged("Matching by position is fast; an entry whose phase\nmatches is new.")
    assert not flagged("The emulated sweep does not reproduce the published peak.")
    assert not flagged("It never matches the seed; the status is emulated — disagrees.")
    assert not flagged("The prediction matches the published depth (model hit).")
    assert not flagged("An agreement at a calibration point is by construction.")
    assert flagged("Emulated results reproduce the *shape* of those curves, never their absolute height.")
    assert not flagged("Neither sweep reproduces the published peak; ours saturates earlier.")
    assert flagged("Ours is not fast; it matches the seed.")
    assert not flagged("This book is a reproducible artifact.")
    assert not flagged("The GPU does completion matching in three modes. See `match_shape`.")
    assert not flagged("```python\nx.reproduces()\n```\n")
    assert _code_strings('display(Markdown(f"ours {a} agrees with the seed"))') == ["ours {} agrees with the seed"]


def test_no_sentence_claims_agreement_its_status_does_not_carry() -> None:
    bad = claims()
    listing = "\n".join(f"  {name}: {s}" for name, s in bad)
    assert not bad, (
        f"{len(bad)} sentence(s) say shape/reproduces/agrees/matches/repeats the/consistent with of a result "
        f"without a negation or a hit status ({', '.join(coverage.HITS)}):\n{listing}"
    )
