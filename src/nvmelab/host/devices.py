# SPDX-License-Identifier: BSD-3-Clause
"""NVMe PCI functions of this host: discovery, driver binding and hugepages over sysfs.

What `nvmelab devices|bind|unbind|hugepages` run on a host. The QEMU guest, which has no Python, runs
the C twin of this module (``src/tools/devmgmt.c``, inside ``nvmelab-guest``). Whether a function is in
use is decided in one place for both, and for ``pci://``: the driver's check ``src/nvme/inuse.c``,
reached here through ``nvmelab._native.pci_in_use``; this module presents its verdict.

Rules:

* only the function the user names is touched: there is no wildcard and no "all";
* it must be an NVMe controller (PCI class 0x010802);
* it is refused when it is the boot device (holds ``/``, ``/boot`` or ``/boot/efi``, or is named by
  ``root=`` on the kernel command line), when one of its namespaces, partitions or the devices stacked
  on them (device-mapper, md) is mounted or used as swap or held by a stacked device, or when a process
  has its block devices, controller character device, ``/dev/uioN`` or ``/dev/vfio/<group>`` open.

Binding uses the kernel's ``driver_override`` + ``drivers_probe`` mechanism; unbinding clears the
override and lets the kernel re-probe (normally the ``nvme`` driver takes the function back).

Every path is taken relative to a root directory (``/`` by default), so tests point the whole module
at a fake tree of ``sys``, ``proc`` and ``dev``.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

PCI_CLASS_NVME = 0x010802
DRIVERS = ("uio_pci_generic", "vfio-pci")
#: Block devices per function the in-use check (src/nvme/inuse.h) can check; more are refused.
MAX_BLOCK_DEVICES = 128  # NVME_INUSE_MAX_BLK; tests compare it with _native.PCI_INUSE_MAX_BLK
HUGEPAGE_SIZES_KB = {"2M": 2 * 1024, "1G": 1024 * 1024}

_ADDR_FULL = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_ADDR_SHORT = re.compile(r"^([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_MAX_PCI_DEVICE = 0x1F


class DeviceError(ValueError):
    """A request about a PCI function that cannot be done; the message names the function and why."""


class RefusedError(DeviceError):
    """The function is in use (boot device, mounted, swap, stacked, open) and was left alone."""


def parse_address(text: str) -> str:
    """Normalise ``BB:DD.F`` or ``DDDD:BB:DD.F`` to ``dddd:bb:dd.f``; DeviceError when malformed."""
    m = _ADDR_FULL.match(text or "")
    if m:
        dom, bus, dev, fn = m.groups()
    else:
        m = _ADDR_SHORT.match(text or "")
        if not m:
            raise DeviceError(f"'{text}' is not a PCI address (DDDD:BB:DD.F)")
        dom, (bus, dev, fn) = "0000", m.groups()
    if int(dev, 16) > _MAX_PCI_DEVICE:
        raise DeviceError(f"'{text}' is not a PCI address (device number above 1f)")
    return f"{int(dom, 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn}"


class Sysfs:
    """sysfs, procfs and /dev below one root; the only place that touches the file system."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root)

    def path(self, p: str) -> Path:
        return self.root / p.lstrip("/")

    def exists(self, p: str) -> bool:
        q = self.path(p)
        return q.exists() or q.is_symlink()

    def read(self, p: str) -> str | None:
        try:
            return self.path(p).read_text().strip()
        except OSError:
            return None

    def readlink(self, p: str) -> str | None:
        try:
            return os.readlink(self.path(p))
        except OSError:
            return None

    def link_name(self, p: str) -> str | None:
        t = self.readlink(p)
        return t.rstrip("/").rsplit("/", 1)[-1] if t else None

    def listdir(self, p: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(p)))
        except OSError:
            return []

    def write(self, p: str, value: str) -> None:
        """One write(2) of value, as sysfs attributes expect."""
        fd = os.open(self.path(p), os.O_WRONLY | os.O_TRUNC)  # as `echo > attr` does
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)

    @property
    def is_host(self) -> bool:
        return self.root.resolve() == Path("/")


@dataclass
class PciFunction:
    """One NVMe PCI function as sysfs shows it."""

    address: str
    vendor: str
    device: str
    driver: str | None
    iommu_group: str | None
    numa_node: int
    controllers: list[str] = field(default_factory=list)  # nvme0 ...
    block_devices: list[str] = field(default_factory=list)  # namespaces, partitions, holders
    busy: list[str] = field(default_factory=list)  # why it must not be taken; [] = free

    @property
    def free(self) -> bool:
        return not self.busy

    def as_dict(self) -> dict:
        return {
            "address": self.address,
            "vendor": self.vendor,
            "device": self.device,
            "driver": self.driver,
            "iommu_group": self.iommu_group,
            "numa_node": self.numa_node,
            "controllers": self.controllers,
            "block_devices": self.block_devices,
            "busy": self.busy,
        }


_CONTROLLER = re.compile(r"^nvme\d+$")


def _pci(addr: str) -> str:
    return f"/sys/bus/pci/devices/{addr}"


def _native():
    from .. import _native as n

    return n


def _root(fs: Sysfs) -> str:
    """The path prefix the native check puts before /sys, /proc and /dev ("" on the host)."""
    return "" if fs.is_host else str(fs.root)


def busy_reasons(addr: str, fs: Sysfs | None = None) -> list[str]:
    """Why ADDR must not be taken from its driver (empty when it is free). DeviceError when absent.

    The verdict is the driver's one in-use check (src/nvme/inuse.c, also used by pci:// and the guest
    tool); this module only presents it."""
    fs = fs or Sysfs()
    addr = parse_address(addr)
    if fs.is_host and os.geteuid() != 0:
        log.warning("not root: open files of other users' processes cannot be checked")
    rc, why = _native().pci_in_use(addr, _root(fs))
    if rc == -errno.ENODEV:
        raise DeviceError(why or f"no PCI function {addr}")
    return why.split("; ") if rc and why else []


def _controllers(fs: Sysfs, addr: str) -> list[str]:
    return [c for c in fs.listdir(f"{_pci(addr)}/nvme") if _CONTROLLER.match(c)]


def _describe(fs: Sysfs, addr: str) -> PciFunction:
    ctrls, blk = _controllers(fs, addr), list(_native().pci_block_devices(addr, _root(fs)))
    numa = fs.read(f"{_pci(addr)}/numa_node")
    return PciFunction(
        address=addr,
        vendor=(fs.read(f"{_pci(addr)}/vendor") or "").removeprefix("0x"),
        device=(fs.read(f"{_pci(addr)}/device") or "").removeprefix("0x"),
        driver=fs.link_name(f"{_pci(addr)}/driver"),
        iommu_group=fs.link_name(f"{_pci(addr)}/iommu_group"),
        numa_node=int(numa) if numa and numa.lstrip("-").isdigit() else -1,
        controllers=ctrls,
        block_devices=blk,
        busy=busy_reasons(addr, fs),
    )


def _is_nvme(fs: Sysfs, addr: str) -> bool:
    cls = fs.read(f"{_pci(addr)}/class")
    try:
        return cls is not None and int(cls, 16) == PCI_CLASS_NVME
    except ValueError:
        return False


def list_functions(fs: Sysfs | None = None) -> list[PciFunction]:
    """Every NVMe PCI function, in address order."""
    fs = fs or Sysfs()
    return [_describe(fs, a) for a in fs.listdir("/sys/bus/pci/devices") if _is_nvme(fs, a)]


def function(addr: str, fs: Sysfs | None = None) -> PciFunction:
    """The NVMe function at ADDR; DeviceError when absent or not an NVMe controller."""
    fs = fs or Sysfs()
    addr = parse_address(addr)
    if not fs.exists(_pci(addr)):
        raise DeviceError(f"no PCI function {addr}")
    if not _is_nvme(fs, addr):
        raise DeviceError(f"{addr} is not an NVMe controller (class {fs.read(f'{_pci(addr)}/class')})")
    return _describe(fs, addr)


def bind(addr: str, driver: str, fs: Sysfs | None = None) -> PciFunction:
    """Move the named function to driver (uio_pci_generic or vfio-pci), refusing one in use."""
    fs = fs or Sysfs()
    if driver not in DRIVERS:
        raise DeviceError(f"driver must be {' or '.join(DRIVERS)}, not '{driver}'")
    fn = function(addr, fs)
    a = fn.address
    if fn.driver == driver:
        log.info("%s already bound to %s", a, driver)
        return fn
    if fn.busy:
        raise RefusedError(f"refusing {a}: {'; '.join(fn.busy)}")
    if driver == "vfio-pci" and not fn.iommu_group:
        raise DeviceError(
            f"{a} has no IOMMU group: enable the IOMMU (intel_iommu=on or amd_iommu=on) or use uio_pci_generic"
        )
    if not fs.exists(f"/sys/bus/pci/drivers/{driver}"):
        if fs.is_host:
            log.info("modprobe %s", driver)
            subprocess.run(["modprobe", driver], check=False, capture_output=True)
        if not fs.exists(f"/sys/bus/pci/drivers/{driver}"):
            raise DeviceError(f"driver {driver} is not loaded (modprobe {driver})")
    try:
        if fn.driver:
            log.info("unbinding %s from %s", a, fn.driver)
            fs.write(f"{_pci(a)}/driver/unbind", a)
        fs.write(f"{_pci(a)}/driver_override", driver)
        fs.write("/sys/bus/pci/drivers_probe", a)
    except OSError as exc:
        raise DeviceError(f"binding {a} to {driver}: {exc.strerror or exc}") from exc
    now = fs.link_name(f"{_pci(a)}/driver")
    if now != driver:
        raise DeviceError(f"{a} did not bind to {driver} (now '{now or ''}'; see dmesg)")
    log.info("%s bound to %s", a, driver)
    return _describe(fs, a)


def unbind(addr: str, reprobe: bool = True, fs: Sysfs | None = None) -> PciFunction:
    """Release the named function from its driver; with reprobe the kernel's own driver takes it back."""
    fs = fs or Sysfs()
    fn = function(addr, fs)
    a = fn.address
    try:
        if fn.driver:
            if fn.busy:
                raise RefusedError(f"refusing {a}: {'; '.join(fn.busy)}")
            fs.write(f"{_pci(a)}/driver/unbind", a)
        fs.write(f"{_pci(a)}/driver_override", "\n")  # a newline clears the override
        if reprobe:
            fs.write("/sys/bus/pci/drivers_probe", a)
    except OSError as exc:
        raise DeviceError(f"releasing {a}: {exc.strerror or exc}") from exc
    return _describe(fs, a)


@dataclass
class Hugepages:
    """Hugepages of one size as the kernel reports them."""

    size_kb: int
    total: int
    free: int
    mounts: list[str]  # hugetlbfs mount points

    def __str__(self) -> str:
        where = ", ".join(self.mounts) if self.mounts else "no hugetlbfs mounted"
        return f"{self.total} hugepages of {self.size_kb} kB reserved, {self.free} free ({where})"


def hugepages(count: int | None = None, size: str = "2M", fs: Sysfs | None = None) -> Hugepages:
    """Reserve count hugepages of size (None: only report); DeviceError when the kernel gives fewer."""
    fs = fs or Sysfs()
    if size not in HUGEPAGE_SIZES_KB:
        raise DeviceError(f"hugepage size must be {' or '.join(HUGEPAGE_SIZES_KB)}, not '{size}'")
    if count is not None and count < 0:
        raise DeviceError(f"hugepage count must be >= 0, not {count}")
    kb = HUGEPAGE_SIZES_KB[size]
    d = f"/sys/kernel/mm/hugepages/hugepages-{kb}kB"
    if not fs.exists(d):
        raise DeviceError(f"hugepage size {size} ({kb} kB) is not supported by this kernel")
    before = int(fs.read(f"{d}/nr_hugepages") or 0)
    if count is not None:
        try:
            fs.write(f"{d}/nr_hugepages", str(count))
        except OSError as exc:
            raise DeviceError(f"writing {d}/nr_hugepages: {exc.strerror or exc}") from exc
    total = int(fs.read(f"{d}/nr_hugepages") or 0)
    free = int(fs.read(f"{d}/free_hugepages") or 0)
    mounts = [
        f[4]
        for f in (ln.split() for ln in (fs.read("/proc/self/mountinfo") or "").splitlines())
        if "-" in f and f[f.index("-") + 1 :][:1] == ["hugetlbfs"]
    ]
    state = Hugepages(kb, total, free, mounts)
    if count is not None and total < count:
        # A short reservation can hold nearly all of the host's memory (a typo such as 1000000 takes
        # whatever the kernel could give): give it back, so a refused request changes nothing.
        fs.write(f"{d}/nr_hugepages", str(before))
        raise DeviceError(
            f"asked for {count} hugepages of {kb} kB, the kernel could reserve only {total}; "
            f"left at {before} (memory fragmented? try at boot: hugepages={count})"
        )
    return state
