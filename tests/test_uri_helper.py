# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.driver.uri, the one Python URI helper over the driver's parser (_native.uri_parse): parse, kind,
get, with_params on the URIs of the repo's tests and docs; its cheap kind() agreeing with the parser; the
scheme table read from C (_native.uri_schemes) and cuda-run's dispatcher held to it; and a guard that no scheme test or URI string edit lives anywhere else in src/nvmelab (issue 37)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from nvmelab import _native
from nvmelab.driver import uri

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "nvmelab"
HELPER = PKG / "driver" / "uri.py"

_CORPUS_RE = re.compile(r"\b(?:emu|gpu-emu|pci|vfio-user|file|blk|nbds?(?:\+unix|\+vsock)?|image)://[^\s\"'`)<>\]\\|]*")


def _corpus() -> list[str]:
    """Every URI-looking text of the tests, the book and the READMEs that the grammar accepts."""
    files = [*sorted((ROOT / "tests").glob("*.py")), *sorted((ROOT / "book").glob("*.md"))]
    files += [ROOT / "src" / "README.md", ROOT / "README.md"]
    found = sorted({m for f in files if f.is_file() for m in _CORPUS_RE.findall(f.read_text(encoding="utf-8"))})
    ok = []
    for u in found:
        try:
            uri.parse(u)
        except ValueError:
            continue  # prose ("emu://, pci://"), placeholders ("emu://?key=value&..."), the refusals tests pose
        ok.append(u)
    return ok


CORPUS = _corpus()


def test_the_corpus_is_not_trivially_small() -> None:
    assert len(CORPUS) >= 100, CORPUS
    assert {uri.kind(u) for u in CORPUS} >= {"emu", "gpu-emu", "pci", "vfio-user", "file", "blk"}


def test_parse_reads_what_the_driver_reads() -> None:
    u = uri.parse("pci://0000:4a:00.0,0000:4b:00.0?driver=vfio&verbose")
    assert u == uri.Uri("pci", ("0000:4a:00.0", "0000:4b:00.0"), "", (("driver", "vfio"), ("verbose", "1")))
    assert u.get("driver") == "vfio" and u.get("absent") is None and u.get("absent", 7) == 7
    assert u.keys() == ("driver", "verbose")
    f = uri.parse("FILE:///tmp/a%20b?backend=psync")
    assert (f.scheme, f.authority, f.path, f.params) == ("file", (), "/tmp/a b", (("backend", "psync"),))
    assert uri.parse("emu://") == uri.Uri("emu")
    assert uri.parse("vfio-user:///tmp/nvl/ctrl0").path == "/tmp/nvl/ctrl0"
    d = _native.uri_parse("emu://?ndev=2&nsze=64MiB")
    assert d == {"scheme": "emu", "authority": [], "path": "", "params": [("ndev", "2"), ("nsze", "64MiB")]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty URI"),
        ("emu:/x", "has no scheme"),
        ("emu://?a&a", "parameter 'a' given twice"),
        ("emu://?nsze=", "parameter 'nsze': empty value"),
        ("emu://?", "empty query after '?'"),
        ("emu://?Bad=1", "bad parameter name 'Bad'"),
        ("pci://a,,b", "empty item"),
        ("file:///a b", "space or control character"),
        ("emu://?x=%zz", "bad %-escape"),
        ("emu://?x=\0", "NUL"),
    ],
)
def test_the_parsers_refusals_are_value_errors_with_its_message(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        uri.parse(text)
    if text:
        with pytest.raises(ValueError, match=re.escape(message)):
            uri.get(text, "x")
        with pytest.raises(ValueError, match=re.escape(message)):
            uri.with_params(text, x=1)


@pytest.mark.parametrize("fn", [uri.parse, uri.kind, uri.is_emulated, uri.tail, uri.with_params])
def test_a_non_str_is_a_type_error(fn) -> None:
    for bad in (None, 3, b"emu://", Path("/tmp/x")):
        with pytest.raises(TypeError, match="expected a str"):
            fn(bad)


def test_kind() -> None:
    assert uri.kind("emu://?profile=null") == "emu"
    assert uri.kind("gpu-emu://?ndev=2") == "gpu-emu"
    assert uri.kind("nbd+unix:///?socket=/tmp/s") == "nbd+unix"
    assert uri.kind("EMU://") == "emu"  # the parser lower-cases the scheme
    assert uri.kind("/tmp/data.img") == "" and uri.kind("-") == "" and uri.kind("") == ""
    assert uri.kind("/tmp/a://b") == ""  # a file name, not a scheme
    assert uri.kind("://x") == ""
    assert uri.is_emulated("emu://") and uri.is_emulated("gpu-emu://?nsze=1MiB") and not uri.is_emulated("pci://x")
    assert not uri.is_emulated("emu") and not uri.is_emulated("/emu://")


def test_the_scheme_table_is_the_c_table() -> None:
    """uri.SCHEMES, EMULATED and schemes() read the driver's one table (src/nvme/scheme.h) through
    _native.uri_schemes: the lists each C dispatcher's messages name."""
    rows = _native.uri_schemes()
    assert [r["kind"] for r in rows] == list(range(len(rows)))
    assert tuple(uri.SCHEMES) == tuple(r["name"] for r in rows)
    assert uri.EMULATED == ("emu", "gpu-emu")
    assert uri.schemes("driver") == ("emu", "pci", "vfio-user")
    assert uri.schemes("kio") == ("file", "blk")
    assert uri.schemes("cuda_run") == ("emu", "pci", "gpu-emu")
    assert uri.schemes("image") == ("emu", "pci", "file", "blk")
    assert uri.schemes("nbd") == ("nbd", "nbds", "nbd+unix", "nbds+unix", "nbd+vsock", "nbds+vsock")
    with pytest.raises(ValueError, match="no scheme has it"):
        uri.schemes("nope")
    for name, row in uri.SCHEMES.items():
        assert uri.parse(f"{name}://").scheme == name and uri.kind(f"{name.upper()}://x") == name
        assert row.example.startswith(f"{name}://") and row.what
        assert uri.scheme(f"{name}://?a=1") is row
    assert uri.scheme("/tmp/emu://x") is None and uri.scheme("nope://x") is None
    # the corpus's schemes are the table's (and the fixture's "image://")
    assert {uri.kind(u) for u in CORPUS} - set(uri.SCHEMES) <= {"image"}


def _has_cuda() -> bool:
    try:
        _native.cuda_target_check("gpu-emu://", 1)
    except AttributeError:
        return False
    except (ValueError, OSError):
        pass
    return True


@pytest.mark.skipif(not _has_cuda(), reason="a build without CUDA has no cuda-run dispatcher")
def test_cuda_run_takes_exactly_its_rows() -> None:
    """cuda-run's dispatcher (crun_target.cu) takes the rows flagged cuda_run, and names them for the rest. The
    probe key is refused by every backend before it touches anything (no run starts, no PCI function opens)."""
    want = "cuda-run drives emu://, pci:// or gpu-emu:// (emu:// with mode=thread)"
    for name, row in uri.SCHEMES.items():
        target = f"{name}://?nvmelab_probe=1"
        with pytest.raises((ValueError, OSError)) as e:
            _native.cuda_run(target=target, payload="host")
        if "cuda_run" in row.flags:
            assert "cuda-run drives" not in str(e.value), (target, e.value)
        else:
            assert str(e.value) == f"target '{target}': {want}", e.value


def test_cheap_kind_agrees_with_the_parser_on_the_corpus() -> None:
    for u in CORPUS:
        assert uri.kind(u) == uri.parse(u).scheme, u


def test_cheap_kind_agrees_with_the_parser_on_random_text() -> None:
    """Whatever the parser accepts, kind() names its scheme; what kind() finds no scheme in, the parser
    refuses."""
    rng = random.Random(37)
    alphabet = "aEz09+.-_:/?&=,% \x01\x7f"
    pieces = ["://", "emu", "gpu-emu", "PCI", "?", "&", "=", "/", ",", "%41", "%2", "x", "ndev=2"]
    heads = ["emu", "gpu-emu", "PCI", "nbd+unix", "a.b-c", "x" * 15, "x" * 16, "e u", "/tmp/a", "", "Emu"]
    accepted = 0
    for _ in range(20000):
        parts = [rng.choice(pieces) if rng.random() < 0.5 else rng.choice(alphabet) for _ in range(rng.randrange(12))]
        text = "".join(parts)
        if rng.random() < 0.6:
            text = rng.choice(heads) + "://" + text
        try:
            scheme = uri.parse(text).scheme
        except ValueError:
            continue
        accepted += 1
        assert uri.kind(text) == scheme, text
    assert accepted > 500


def test_get() -> None:
    assert uri.get("emu://?ndev=2&nsze=64MiB", "nsze") == "64MiB"
    assert uri.get("emu://?ndev=2", "nsze") is None
    assert uri.get("emu://?ndev=2", "nsze", "1GiB") == "1GiB"
    assert uri.get("emu://?mode=thread&profile=null", "mode") == "thread"
    assert uri.get("emu://?verify", "verify") == "1"  # a bare key means key=1
    assert uri.get("file:///x?tag=a%26b", "tag") == "a&b"


def test_with_params() -> None:
    assert uri.with_params("emu://?profile=pm1753", ndev=4) == "emu://?profile=pm1753&ndev=4"
    assert uri.with_params("emu://", ndev=2) == "emu://?ndev=2"
    assert uri.with_params("emu://?a=1&b=2&c=3", b=5) == "emu://?a=1&b=5&c=3"  # keeps its place
    assert uri.with_params("emu://?a=1&b=2&c=3", b=None) == "emu://?a=1&c=3"
    assert uri.with_params("emu://?a=1", a=None) == "emu://"
    assert uri.with_params("emu://?a=1", z=None) == "emu://?a=1"
    assert uri.with_params("emu://?lba&x=%41", y=True, z=False) == "emu://?lba&x=%41&y=1&z=0"  # others as written
    assert uri.with_params("file:///tmp/a%20b", backend="psync") == "file:///tmp/a%20b?backend=psync"
    assert uri.with_params("pci://0000:4a:00.0", driver="uio") == "pci://0000:4a:00.0?driver=uio"
    assert uri.get(uri.with_params("emu://", tag="a&b c%"), "tag") == "a&b c%"
    assert uri.without_params("emu://?ndev=4&profile=x", "ndev") == "emu://?profile=x"
    assert uri.without_params("emu://?ndev=4", "ndev", "absent") == "emu://"
    with pytest.raises(ValueError, match="lower-case letters"):
        uri.with_params("emu://", Bad=1)
    with pytest.raises(ValueError, match="empty value"):
        uri.with_params("emu://", x="")
    with pytest.raises(TypeError, match="parameter 'x'"):
        uri.with_params("emu://", x=[1])


def test_with_params_round_trips_on_the_corpus() -> None:
    for u in CORPUS:
        assert uri.with_params(u) == u
        v = uri.with_params(u, zz_probe="a&b=c d")
        assert uri.get(v, "zz_probe") == "a&b=c d"
        assert uri.without_params(v, "zz_probe") == u
        p = uri.parse(u)
        assert uri.parse(v).params == (*p.params, ("zz_probe", "a&b=c d"))
        assert uri.parse(str(p)) == p, u


def test_canonical_and_tail() -> None:
    assert uri.canonical("emu://?profile=x&ndev=4&lat=5", drop=("ndev",)) == "emu://?lat=5&profile=x"
    assert uri.canonical("nan") == "nan" and uri.canonical("") == ""
    assert uri.tail("file:///tmp/my file.img") == "/tmp/my file.img"  # as written, not parsed
    assert uri.tail("/tmp/x") == ""


def test_the_callers_use_the_helper() -> None:
    from nvmelab.engines import gpu_standin
    from nvmelab.studies.spec import emu_target_for

    assert emu_target_for("emu://?profile=pm1753", 4) == "emu://?profile=pm1753&ndev=4"
    assert emu_target_for("gpu-emu://?ndev=2", 4) == "gpu-emu://?ndev=2"
    assert gpu_standin.standin_target("gpu-emu://?profile=pm1753&ndev=16&blocks=4", None) == (
        "emu://?profile=pm1753&ndev=4",
        4,
    )


# ---- the guard: scheme tests and URI string edits live in nvmelab/driver/uri.py only ----

#: Scheme tests and string edits of a URI: startswith("emu://"...), "://" in x, split/partition on
#: "://", slicing off len("file://"), a key tested as a substring ("mode=thread" in target), urllib's
#: parsers (a second grammar).
FORBIDDEN = [
    re.compile(r"""startswith\(\s*\(?\s*[rbf]?["'][a-z0-9+.\-]*://"""),
    re.compile(r"""["']://["']\s+(?:not\s+)?in\b"""),
    re.compile(r"""\.(?:split|rsplit|partition|rpartition|index|find)\(\s*["']://["']"""),
    re.compile(r"""len\(\s*["'][a-z0-9+.\-]+://["']\s*\)"""),
    re.compile(r"""["'][a-z_][a-z0-9_]*=[^"'\s]*["']\s+(?:not\s+)?in\s+\w*(?:target|uri|tgt)\w*\b"""),
    re.compile(r"""\b(?:urlsplit|urlparse|parse_qs|parse_qsl)\b"""),
]


def violations(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() for rx in FORBIDDEN if rx.search(line)]


def test_the_guard_finds_what_it_forbids() -> None:
    bad = """
        if target.startswith("emu://"):
        emu = tgt.str.startswith(("emu://", "gpu-emu://"))
        if "://" not in image:
        scheme = s.split("://", 1)[0]
        where = tgt.partition('://')[0]
        path = target[len("file://") :]
        if "mode=thread" not in target:
        q = parse_qs(urlsplit(uri).query)
    """
    assert len(violations(bad)) == 8
    assert violations('x = uri.kind(target) == "emu"\nlog("emu://")\nif "nsze" in keys:') == []


def test_no_scheme_test_or_uri_edit_outside_the_helper() -> None:
    found = []
    for p in sorted(PKG.rglob("*.py")):
        if p == HELPER:
            continue
        found += [f"{p.relative_to(ROOT)}: {v}" for v in violations(p.read_text(encoding="utf-8"))]
    assert found == [], "use nvmelab.driver.uri (kind, is_emulated, get, with_params):\n" + "\n".join(found)
