# SPDX-License-Identifier: BSD-3-Clause
"""The one key table of both emulators (src/nvme/emu/emu_keys.h, issue 37): the docs table in src/README.md is
the C table rendered, the fuzz harness takes its key sets from the table, and both emulators take the canonical
spellings and (for one release) the old ones. The C side (messages, warnings, profile and scale) is
tests/c/test_emu_keys.c."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADER = ROOT / "src" / "nvme" / "emu" / "emu_keys.h"
README = ROOT / "src" / "README.md"
FUZZ = ROOT / "tests" / "fuzz" / "fuzz_uri.c"
FIELDS = ("name", "old", "oldval", "newval", "who", "list", "values", "def_cpu", "def_gpu", "doc")


def _split_args(text: str) -> list[str]:
    """Top-level comma split of one X(...) row's arguments (commas inside string literals stay)."""
    out, cur, in_str, esc = [], [], False, False
    for ch in text:
        if in_str:
            cur.append(ch)
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            cur.append(ch)
        elif ch == ",":
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).strip())
    return out


def _c_value(arg: str):
    """A row field: NULL -> None, adjacent string literals joined and unescaped, else the bare token."""
    if arg == "NULL":
        return None
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"', arg)
    if not parts:
        return arg
    return re.sub(r"\\(.)", r"\1", "".join(parts))


def table() -> list[dict]:
    """The rows of NVME_EMU_KEYS, as the compiler reads them (the macro's text, continuation lines joined)."""
    src = HEADER.read_text(encoding="utf-8")
    body = src.split("#define NVME_EMU_KEYS(X)", 1)[1].split("\n\n", 1)[0]
    body = re.sub(r"\\\n", "\n", body)
    rows = []
    for m in re.finditer(r"\bX\((.*?)\)\s*(?=\bX\(|\Z)", body, re.S):
        args = _split_args(m.group(1))
        assert len(args) == len(FIELDS), args
        rows.append(dict(zip(FIELDS, (_c_value(a) for a in args), strict=True)))
    return rows


def render() -> str:
    """The docs table of src/README.md, rendered from the C table."""
    lines = [
        "| key | values | `emu://` default | `gpu-emu://` default | meaning |",
        "|---|---|---|---|---|",
    ]
    for r in table():
        key = f"`{r['name']}`" + (" ¹" if r["list"] == "1" else "")
        if r["old"]:
            key += f" (was `{r['old']}`)"
        if r["oldval"]:
            key += f" (`{r['oldval']}` is now `{r['newval']}`)"
        cpu = r["def_cpu"] if "CPU" in r["who"] or "BOTH" in r["who"] else ""
        gpu = r["def_gpu"] if "GPU" in r["who"] or "BOTH" in r["who"] else ""
        lines.append(f"| {key} | {r['values']} | {cpu or '—'} | {gpu or '—'} | {r['doc']} |")
    return "\n".join(lines) + "\n"


def test_table_parses():
    rows = table()
    names = [r["name"] for r in rows]
    assert len(names) == len(set(names)) >= 30
    assert {r["name"]: r["old"] for r in rows if r["old"]} == {"nsze": "ns", "lbads": "lba"}
    assert [(r["name"], r["oldval"], r["newval"]) for r in rows if r["oldval"]] == [("data", "ram", "copy")]


def test_readme_table_is_the_c_table():
    """The key table in src/README.md is the C table rendered (render() here prints it: paste it over the old)."""
    assert render() in README.read_text(encoding="utf-8"), (
        "src/README.md's emulator key table differs from:\n" + render()
    )


def test_fuzz_key_sets_come_from_the_table():
    """fuzz_uri.c checks every URI's keys with the table of both emulators, and lists no emulator key by hand."""
    src = FUZZ.read_text(encoding="utf-8")
    assert "nvme_emu_keys_check" in src and "NVME_EMU_CPU" in src and "NVME_EMU_GPU" in src
    hand = {r["name"] for r in table()} & set(re.findall(r'"([a-z_]+)"', src))
    assert not hand, f"fuzz_uri.c lists emulator keys by hand: {sorted(hand)}"


def test_fuzz_corpus_has_both_spellings():
    corpus = "\n".join(
        p.read_text(encoding="utf-8", errors="replace") for p in (ROOT / "tests/fuzz/corpus/uri").iterdir()
    )
    for want in ("gpu-emu://?nsze=", "&lbads=", "data=ram", "emu://?ns="):
        assert want in corpus, want


def test_emu_takes_canonical_and_old_spellings():
    from nvmelab import driver

    with driver.open("emu://?nsze=4MiB&lbads=4096&data=copy") as t:
        assert t.namespace(1).lba_size == 4096
    with driver.open("emu://?ns=4MiB&lba=4096&data=ram") as t:  # old spellings: the same controller
        assert t.namespace(1).lba_size == 4096 and t.namespace(1).nsze * 4096 == 4 << 20
    with pytest.raises(ValueError, match=r"unknown parameter 'colour' \(known: ndev nns nsze ncap lbads"):
        driver.open("emu://?colour=blue")
    with pytest.raises(ValueError, match="parameter 'nsze' given twice"):
        driver.open("emu://?nsze=4MiB&ns=4MiB")


def test_gpu_emu_takes_canonical_and_old_spellings():
    nat = pytest.importorskip("nvmelab._native")
    if not hasattr(nat, "cuda_target_check"):
        pytest.skip("built without the CUDA parts")
    new = nat.cuda_target_check("gpu-emu://?ndev=2&nsze=4MiB&lbads=4096&data=copy")
    old = nat.cuda_target_check("gpu-emu://?ndev=2&ns=4MiB&lba=4096&data=ram")
    assert new == old and "ns=4MiB lba=4096 data=ram" in new  # the record's description is unchanged
    gpu_keys = " ".join(r["name"] for r in table() if r["who"] in ("NVME_EMU_GPU", "NVME_EMU_BOTH"))
    with pytest.raises(ValueError, match=re.escape(f"unknown parameter 'colour' (known: {gpu_keys})")):
        nat.cuda_target_check("gpu-emu://?colour=blue")
    with pytest.raises(ValueError, match="'nsze'"):
        nat.cuda_target_check("gpu-emu://?nsze=1000")


def test_emu_internal_inlines_call_nothing_above():
    """emu_internal.h (the types every emulator file shares) has no inline that calls a function of an emulator
    .c file: the fast paths that do (emu_ns_read, emu_dma_ok/emu_dma_ptr, emu_sq_doorbell) live in their owners'
    headers (ns.h, prp.h, io.h), issue 37 item 5."""
    emu = ROOT / "src" / "nvme" / "emu"
    shared = (emu / "emu_internal.h").read_text(encoding="utf-8")
    defined = set()
    for c in emu.glob("*.c"):
        defined |= set(re.findall(r"^[a-z][\w \*]*?\b(emu_\w+)\(", c.read_text(encoding="utf-8"), re.M))
    bodies = re.findall(r"static inline[^{;]*\{(.*?)\n\}", shared, re.S)
    assert bodies, "no inline found in emu_internal.h: the test reads it wrongly"
    calls = {name for b in bodies for name in re.findall(r"\b(emu_\w+)\(", b)}
    assert not calls & defined, f"emu_internal.h's inlines call into emulator .c files: {sorted(calls & defined)}"
    for owner, fn in (
        ("ns.h", "emu_ns_read"),
        ("prp.h", "emu_dma_ptr"),
        ("prp.h", "emu_dma_ok"),
        ("io.h", "emu_sq_doorbell"),
    ):
        assert re.search(rf"static inline [^(]*\b{fn}\(", (emu / owner).read_text(encoding="utf-8")), (owner, fn)


def _size(text: str) -> int:
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    m = re.fullmatch(r"(\d+)(KiB|MiB|GiB)?", text)
    assert m, text
    return int(m.group(1)) * units.get(m.group(2) or "", 1)


def test_table_defaults_are_what_the_parsers_do():
    """The defaults the table documents are the ones each emulator applies (a URI with no key at all)."""
    d = {r["name"]: r for r in table()}
    from nvmelab import driver

    with driver.open("emu://") as t:
        ns = t.namespace(1)
        assert len(t) == int(d["ndev"]["def_cpu"]) and t.nsids == list(range(1, int(d["nns"]["def_cpu"]) + 1))
        assert ns.lba_size == int(d["lbads"]["def_cpu"]) and ns.nsze * ns.lba_size == _size(d["nsze"]["def_cpu"])
        assert t.mdts_bytes == _size(d["mdts"]["def_cpu"])
    nat = pytest.importorskip("nvmelab._native")
    if not hasattr(nat, "cuda_target_check"):
        pytest.skip("built without the CUDA parts")
    desc = nat.cuda_target_check("gpu-emu://")  # the record's description keeps its field names (ns=, lba=)
    for field, key in (("blocks", "blocks"), ("warps", "warps"), ("ns", "nsze"), ("lba", "lbads"), ("fill", "fill")):
        assert f" {field}={d[key]['def_gpu']} " in desc, (field, desc)
    for key in ("profile", "scale", "ooo", "drop"):
        assert f"{key}={d[key]['def_gpu']} " in desc, (key, desc)
    assert "ndev=16 " in desc and "data=ram " in desc  # data=copy, described as before


def _ranged_rows():
    """(row, lo, hi) of every row whose values are a plain integer range "lo..hi"."""
    for r in table():
        m = re.fullmatch(r"(\d+)\.\.(\d+)", r["values"])
        if m:
            yield r, int(m.group(1)), int(m.group(2))


def test_table_bounds_are_what_the_parsers_take():
    """An integer range the table documents is the one each emulator takes: lo and hi pass, lo-1 and hi+1 fail."""
    from nvmelab import driver

    nat = pytest.importorskip("nvmelab._native")
    gpu = hasattr(nat, "cuda_target_check")
    rows = list(_ranged_rows())
    assert {r["name"] for r, _, _ in rows} >= {"ndev", "nns", "mqes", "nioq", "dstrd", "fetch", "blocks", "warps"}
    for r, lo, hi in rows:
        key = r["name"]
        if r["who"] in ("NVME_EMU_CPU", "NVME_EMU_BOTH"):
            for v in (lo, hi):
                driver.open(f"emu://?nsze=1MiB&{key}={v}").close()
            for v in (lo - 1, hi + 1) if lo else (hi + 1,):
                with pytest.raises(ValueError, match=f"'{key}'"):
                    driver.open(f"emu://?nsze=1MiB&{key}={v}")
        if gpu and r["who"] in ("NVME_EMU_GPU", "NVME_EMU_BOTH"):
            for v in (lo, hi):
                nat.cuda_target_check(f"gpu-emu://?{key}={v}")
            for v in (lo - 1, hi + 1) if lo else (hi + 1,):
                with pytest.raises(ValueError, match=f"'{key}'"):
                    nat.cuda_target_check(f"gpu-emu://?{key}={v}")


def test_old_spellings_are_named_once_per_uri_where_users_see_them(caplog):
    """The emulators accept the old spellings and say so: the Python layer logs the emulator's own words once
    per URI (driver.errors.check_uri, the gate of every target), nvmelab-serve prints them on stderr."""
    from nvmelab import _native
    from nvmelab.driver import errors
    from nvmelab.host import serve

    old = "emu://?nsze=1MiB&lba=4096&data=ram"
    got = _native.emu_uri_warnings(old)
    assert "'lba' is now 'lbads'" in got and "'data=ram' is now 'data=copy'" in got and "'nsze'" not in got
    gpu = _native.emu_uri_warnings("gpu-emu://?ns=4MiB")
    assert gpu.startswith("gpu-emu: parameter 'ns' is now 'nsze'")
    for quiet in ("emu://?nsze=1MiB&lbads=4096", "pci://0000:01:00.0", "gpu-emu://?bogus=1", "not a uri"):
        assert _native.emu_uri_warnings(quiet) == "", quiet
    errors._warn_old_spellings.cache_clear()
    with caplog.at_level("WARNING", logger="nvmelab.driver.errors"):
        errors.check_uri(old)
        errors.check_uri(old)
        errors.check_uri("emu://?nsze=1MiB")
    said = [r.getMessage() for r in caplog.records if r.name == "nvmelab.driver.errors"]
    assert said == [got]
    with serve.Server("emu://?ns=1MiB") as s:
        pass
    assert "nvmelab-serve: emu: parameter 'ns' is now 'nsze'" in s.stderr


def test_the_binding_hands_up_the_same_table():
    """_native.emu_keys() (what Python reads: the stand-in's dropped keys) is the header's table, row for row."""
    from nvmelab import _native

    who = {"NVME_EMU_CPU": ("emu",), "NVME_EMU_GPU": ("gpu-emu",), "NVME_EMU_BOTH": ("emu", "gpu-emu")}
    rows = _native.emu_keys()
    assert [r["name"] for r in rows] == [r["name"] for r in table()]
    for got, want in zip(rows, table()):
        assert got["old"] == want["old"] and got["emulators"] == who[want["who"]], got["name"]
        assert (got["default_emu"], got["default_gpu_emu"]) == (want["def_cpu"], want["def_gpu"]), got["name"]
