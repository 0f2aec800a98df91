# SPDX-License-Identifier: BSD-3-Clause
"""Target URIs in Python: the driver's one grammar (src/nvme/uri.h, src/README.md "Target URIs").

Every scheme test and every edit of a URI in the package goes through here, so that Python and the C
dispatchers read a URI the same way::

    from nvmelab.driver import uri

    uri.kind("gpu-emu://?profile=null")              # "gpu-emu"   ("" for a path without "://")
    uri.is_emulated("emu://?ndev=2")                 # True        (emu:// or gpu-emu://)
    uri.get("emu://?ndev=2&nsze=64MiB", "nsze")      # "64MiB"     (None when absent; a bare key is "1")
    uri.with_params("emu://?profile=x", ndev=4)      # "emu://?profile=x&ndev=4"
    uri.without_params("emu://?ndev=4&profile=x", "ndev")   # "emu://?profile=x"
    uri.parse("pci://0000:4a:00.0?driver=vfio").authority  # ("0000:4a:00.0",)
    uri.canonical("emu://?ndev=4&profile=x&lat=5", drop=("ndev",))  # "emu://?lat=5&profile=x" (to compare)
    uri.tail("file:///tmp/my image")                 # "/tmp/my image" (as written: blksum's file names)
    uri.scheme("gpu-emu://?ns=1").flags               # ("cuda_run", "emulated", "needs_cuda")

The schemes and what serves them are the driver's one table (src/nvme/scheme.h, ``_native.uri_schemes``),
read once: ``SCHEMES`` (name -> Scheme, in table order), ``EMULATED`` (the rows flagged emulated),
``schemes(flag)`` (the names of the rows with a flag: "driver", "kio", "cuda_run", "image", "nbd", ...).

``parse`` (and everything that reads parameters) is the C parser (``_native.uri_parse``): a URI the
grammar refuses raises ValueError with the parser's message, a non-str TypeError. ``kind`` and
``is_emulated`` take a cheap path (the text before the first "://", no call into C) so that they can
run over every row of a records table; on every URI the parser accepts they give the parser's scheme.

Imports only the standard library and nvmelab._native (the lowest Python layer), which it reads at import
(the scheme table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from .. import _native

__all__ = [
    "EMULATED",
    "SCHEMES",
    "Scheme",
    "Uri",
    "canonical",
    "get",
    "is_emulated",
    "kind",
    "parse",
    "scheme",
    "schemes",
    "tail",
    "with_params",
    "without_params",
]


@dataclass(frozen=True)
class Scheme:
    """One row of the driver's scheme table (src/nvme/scheme.h): ``name`` (lower case, no "://"), ``flags``
    (the layers that serve it and its traits: "driver", "kio", "cuda_run", "image", "nbd", "emulated",
    "needs_cuda", "needs_nbd"), ``what`` (one line) and ``example`` (a URI shape)."""

    name: str
    flags: tuple[str, ...]
    what: str
    example: str


#: Every scheme of the driver's table, by name, in table order.
SCHEMES: dict[str, Scheme] = {
    r["name"]: Scheme(r["name"], tuple(r["flags"]), r["what"], r["example"]) for r in _native.uri_schemes()
}
#: The schemes served by an emulated controller (host memory, CPU threads / GPU memory, GPU threads).
EMULATED = tuple(name for name, row in SCHEMES.items() if "emulated" in row.flags)

_SEP = "://"
#: A scheme as uri.c takes it: 1..15 of [A-Za-z0-9+.-] (it lower-cases the letters).
_SCHEME = re.compile(r"[A-Za-z0-9+.\-]{1,15}")
#: A parameter key as uri.c takes it.
_KEY = re.compile(r"[a-z0-9_]+")
#: Characters a value (or path) must carry as %XX to read back as written: the escape character, the
#: separators of the query, and what uri.c refuses raw (space, control characters, DEL).
_VALUE_ESCAPE = re.compile(r"[%&\x00-\x20\x7f]")
_PATH_ESCAPE = re.compile(r"[%?\x00-\x20\x7f]")


@dataclass(frozen=True)
class Uri:
    """A parsed target URI: ``scheme`` (lower case), ``authority`` (its comma-separated items),
    ``path`` (decoded, "" when absent) and ``params`` ((key, value) pairs in URI order, values decoded,
    a bare key as "1")."""

    scheme: str
    authority: tuple[str, ...] = ()
    path: str = ""
    params: tuple[tuple[str, str], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        """The value of parameter `key`, or `default` when the URI does not name it."""
        for k, v in self.params:
            if k == key:
                return v
        return default

    def keys(self) -> tuple[str, ...]:
        """The parameter keys, in URI order."""
        return tuple(k for k, _ in self.params)

    def __str__(self) -> str:
        """The URI in its plain form (parse(str(u)) == u): escapes only where the grammar needs them."""
        text = f"{self.scheme}{_SEP}{','.join(self.authority)}{_escape(self.path, _PATH_ESCAPE)}"
        if self.params:
            text += "?" + "&".join(f"{k}={_escape(v, _VALUE_ESCAPE)}" for k, v in self.params)
        return text


def _text(uri: Any, what: str = "uri") -> str:
    if not isinstance(uri, str):
        raise TypeError(f"{what}: expected a str target URI, got {type(uri).__name__} {uri!r}")
    return uri


def _escape(s: str, chars: re.Pattern[str]) -> str:
    return chars.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), s)


def parse(uri: str) -> Uri:
    """The URI as the driver's parser reads it; ValueError (the parser's message) when the grammar
    refuses it, TypeError when `uri` is not a str."""
    d = _native.uri_parse(_text(uri))
    return Uri(
        scheme=d["scheme"],
        authority=tuple(d["authority"]),
        path=d["path"],
        params=tuple((str(k), str(v)) for k, v in d["params"]),
    )


def kind(uri: str) -> str:
    """The scheme of `uri` ("emu", "gpu-emu", "pci", "vfio-user", "file", "blk", "nbd+unix", ...), or ""
    when the text has no "://" or what precedes it is not a scheme (a file name).

    Cheap path: the text before the first "://", lower-cased, without calling the parser; on every URI
    the parser accepts this is the parser's own scheme (tests/test_uri_helper.py holds the two to
    agreement). It does not validate the rest: parse() does."""
    head, sep, _ = _text(uri).partition(_SEP)
    return head.lower() if sep and _SCHEME.fullmatch(head) else ""


def scheme(uri: str) -> Scheme | None:
    """The table's row of `uri`'s scheme (the cheap path of kind()), or None for a file name or a scheme
    outside the table."""
    return SCHEMES.get(kind(uri))


def schemes(flag: str) -> tuple[str, ...]:
    """The names of the table's rows with `flag` ("driver", "kio", "cuda_run", "image", "nbd", "emulated",
    ...), in table order; ValueError for a flag no row has."""
    names = tuple(name for name, row in SCHEMES.items() if flag in row.flags)
    if not names:
        raise ValueError(
            f"flag {flag!r}: no scheme has it (flags: {sorted({f for r in SCHEMES.values() for f in r.flags})})"
        )
    return names


def is_emulated(uri: str) -> bool:
    """Whether `uri` names emulated controllers (emu:// or gpu-emu://); the cheap path of kind()."""
    return kind(uri) in EMULATED


def get(uri: str, key: str, default: Any = None) -> Any:
    """The value of parameter `key` in `uri` (decoded; a bare key is "1"), or `default` when absent."""
    return parse(uri).get(key, default)


def tail(uri: str) -> str:
    """The text after "scheme://" exactly as written (not parsed, nothing decoded); "" when `uri` has no
    scheme. For readers that take any file name after file:// or blk:// (blksum), spaces included."""
    text = _text(uri)
    return text.partition(_SEP)[2] if kind(text) else ""


def _value(key: str, v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (int, float, str)):
        s = str(v)
        if not s:
            raise ValueError(f"parameter {key!r}: empty value")
        return _escape(s, _VALUE_ESCAPE)
    raise TypeError(f"parameter {key!r}: expected a str, int, float or bool value, got {type(v).__name__}")


def with_params(uri: str, **kv: Any) -> str:
    """`uri` with each key of `kv` set: a key the URI names keeps its place with the new value, a new key
    goes at the end (in argument order), None removes the key. The other parameters, and everything
    before "?", are kept exactly as written. The URI and the result must parse (ValueError, the
    parser's message, otherwise)."""
    text = _text(uri)
    parse(text)  # the grammar's verdict (and message) on the input
    for k in kv:
        if not _KEY.fullmatch(k):
            raise ValueError(f"parameter name {k!r}: lower-case letters, digits and '_' only")
    head, _, query = text.partition("?")  # a scheme holds no '?': the first one starts the query
    items = query.split("&") if query else []
    out: list[str] = []
    for item in items:
        k = item.split("=", 1)[0]
        if k not in kv:
            out.append(item)
        elif kv[k] is not None:
            out.append(f"{k}={_value(k, kv[k])}")
    named = {item.split("=", 1)[0] for item in items}
    out += [f"{k}={_value(k, v)}" for k, v in kv.items() if v is not None and k not in named]
    result = head + ("?" + "&".join(out) if out else "")
    parse(result)
    return result


def canonical(uri: str, drop: tuple[str, ...] = ()) -> str:
    """`uri` in a form for comparing targets: parameters sorted (by their "key=value" text), the keys in
    `drop` left out, the rest as str(Uri) writes it. Text the grammar refuses (a missing target in a
    records table: "nan", "") is returned unchanged, so a table of any targets can be mapped."""
    try:
        u = parse(uri)
    except ValueError:
        return uri
    return str(replace(u, params=tuple(sorted((kv for kv in u.params if kv[0] not in drop), key="=".join))))


def without_params(uri: str, *keys: str) -> str:
    """`uri` without the parameters `keys` (absent ones are ignored); the rest kept as written."""
    return with_params(uri, **dict.fromkeys(keys))
