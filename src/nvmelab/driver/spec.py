# SPDX-License-Identifier: BSD-3-Clause
"""NVMe constants and SQE building for the Python API.

The numbers come from the C driver's ``src/nvme/spec.h`` through the native module
(one place for each concern); this module only adds the 64-byte SQE packing used by
``QPair.submit_raw`` and ``Controller.admin_raw``.

``sqe(opc=..., nsid=..., cdw10=..., ...)`` builds a submission queue entry; fields not
given are zero. The driver always fills CID (and PRP1/PRP2 when a buffer is passed).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from .. import _native

OPC_FLUSH: int = _native.spec.OPC_FLUSH
OPC_WRITE: int = _native.spec.OPC_WRITE
OPC_READ: int = _native.spec.OPC_READ
OPC_WRITE_ZEROES: int = _native.spec.OPC_WRITE_ZEROES
OPC_DSM: int = _native.spec.OPC_DSM
SQE_SIZE: int = _native.spec.SQE_SIZE
MAX_NLB: int = _native.spec.NLB_MAX  # blocks per Read/Write/Write Zeroes (16-bit, 0-based)
MAX_DSM_NLB: int = 0xFFFFFFFF  # a DSM range's 32-bit NLB field (1-based)
DWORD: int = _native.spec.PRP_ALIGN  # PRP entries must be dword aligned
U64_MAX: int = (1 << 64) - 1

# Layout of struct nvme_sqe (spec.h asserts the same offsets): opc, flags, cid, nsid, cdw2, cdw3,
# mptr, prp1, prp2, cdw10..cdw15.
_SQE = struct.Struct("<BBHIIIQQQIIIIII")
assert _SQE.size == SQE_SIZE
SQE_FIELDS = (
    "opc",
    "flags",
    "cid",
    "nsid",
    "cdw2",
    "cdw3",
    "mptr",
    "prp1",
    "prp2",
    "cdw10",
    "cdw11",
    "cdw12",
    "cdw13",
    "cdw14",
    "cdw15",
)
_FIELD_BITS = dict(zip(SQE_FIELDS, (8, 8, 16, 32, 32, 32, 64, 64, 64, 32, 32, 32, 32, 32, 32)))


def sqe(**fields: int) -> bytes:
    """Pack a 64-byte SQE from named fields (see ``SQE_FIELDS``); missing fields are 0."""
    unknown = set(fields) - set(SQE_FIELDS)
    if unknown:
        raise ValueError(f"sqe: unknown field(s) {sorted(unknown)}; known: {', '.join(SQE_FIELDS)}")
    vals = []
    for name in SQE_FIELDS:
        v = fields.get(name, 0)
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"sqe: field {name} must be an int, got {type(v).__name__}")
        if not 0 <= v < (1 << _FIELD_BITS[name]):
            raise ValueError(f"sqe: field {name}={v} does not fit in {_FIELD_BITS[name]} bits")
        vals.append(v)
    return _SQE.pack(*vals)


def sqe_bytes(s: bytes | bytearray | memoryview | Mapping[str, int]) -> bytes:
    """A 64-byte SQE from bytes-like data or a mapping of fields."""
    if isinstance(s, Mapping):
        return sqe(**s)
    if isinstance(s, (bytes, bytearray, memoryview)):
        b = bytes(s)
        if len(b) != SQE_SIZE:
            raise ValueError(f"sqe: expected {SQE_SIZE} bytes, got {len(b)}")
        return b
    raise TypeError(f"sqe: expected {SQE_SIZE} bytes or a dict of fields, got {type(s).__name__}")


def sqe_fields(raw: bytes) -> dict:
    """Unpack a 64-byte SQE into its named fields."""
    return dict(zip(SQE_FIELDS, _SQE.unpack(sqe_bytes(raw))))


def sqe_nsid(raw: bytes) -> int:
    return _SQE.unpack(raw)[3]


def io_opcode_name(opc: int) -> str:
    """NVM command set opcode name, e.g. ``"Read"``."""
    return str(_native.spec.opc_name(False, int(opc) & 0xFF))


def admin_opcode_name(opc: int) -> str:
    """Admin opcode name, e.g. ``"Identify"``."""
    return str(_native.spec.opc_name(True, int(opc) & 0xFF))


def status_name(sct: int, sc: int) -> str:
    """The specification's name of a status, e.g. ``status_name(0, 0x80) == "LBA Out of Range"``."""
    return str(_native.status_name(int(sct) & 0x7, int(sc) & 0xFF))
