# SPDX-License-Identifier: BSD-3-Clause
"""nvmelab.host.devices and its C twin (src/tools/devmgmt.c) against a fake sysfs/procfs tree.

The fake host has five PCI functions: four NVMe controllers in different states and one bridge:

  0000:00:04.0  nvme0 -> nvme0n1            free
  0000:00:05.0  nvme1 -> nvme1n1 (p1 on /, p2 swap)     boot device
  0000:00:06.0  nvme2 -> nvme2n1 (multipath: nvme2c2n1) -> dm-0 mounted on /data
  0000:00:07.0  nvme3 -> nvme3n1, open by a process
  0000:00:1f.0  ISA bridge (not NVMe)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nvmelab.cli import main as cli_main
from nvmelab.host import devices

ROOT = Path(__file__).resolve().parents[1]
FREE, BOOT, STACKED, OPEN, BRIDGE = "0000:00:04.0", "0000:00:05.0", "0000:00:06.0", "0000:00:07.0", "0000:00:1f.0"


def _w(p: Path, text: str = "") -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _ln(p: Path, target: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.is_symlink():
        p.unlink()
    p.symlink_to(target)


class FakeHost:
    """Builds the tree; `kernel` makes writes to unbind/drivers_probe behave as the kernel would."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for d in ("nvme", "uio_pci_generic", "vfio-pci"):
            _w(root / "sys/bus/pci/drivers" / d / "unbind")
        _w(root / "sys/bus/pci/drivers_probe")
        _w(root / "proc/cmdline", "BOOT_IMAGE=/vmlinuz ro quiet\n")
        _w(root / "proc/swaps", "Filename Type Size Used Priority\n")
        _w(root / "proc/self/mountinfo", "22 1 0:21 / /proc rw - proc proc rw\n")
        hp = root / "sys/kernel/mm/hugepages/hugepages-2048kB"
        _w(hp / "nr_hugepages", "0\n")
        _w(hp / "free_hugepages", "0\n")
        (root / "sys/kernel/mm/hugepages/hugepages-1048576kB").mkdir(parents=True)

    def pci(self, addr: str, cls: str = "0x010802", driver: str | None = "nvme", group: str | None = None) -> Path:
        d = self.root / "sys/bus/pci/devices" / addr
        _w(d / "class", cls + "\n")
        _w(d / "vendor", "0x1b36\n")
        _w(d / "device", "0x0010\n")
        _w(d / "numa_node", "-1\n")
        _w(d / "driver_override", "(null)\n")
        if driver:
            _ln(d / "driver", f"../../drivers/{driver}")
        if group:
            _ln(d / "iommu_group", f"../../../kernel/iommu_groups/{group}")
        return d

    def ctrl(self, addr: str, ctrl: str, ns: str, devno: str, hidden: str | None = None) -> None:
        (self.root / "sys/bus/pci/devices" / addr / "nvme" / ctrl / (hidden or ns)).mkdir(parents=True)
        self.blk(ns, devno)

    def blk(self, name: str, devno: str, parent: str | None = None) -> None:
        _w(self.root / "sys/class/block" / name / "dev", devno + "\n")
        (self.root / "sys/class/block" / name / "holders").mkdir(parents=True, exist_ok=True)
        if parent:
            _w(self.root / "sys/class/block" / parent / name / "partition", "1\n")

    def holder(self, blk: str, holder: str, devno: str) -> None:
        (self.root / "sys/class/block" / blk / "holders" / holder).mkdir(parents=True)
        self.blk(holder, devno)

    def mount(self, devno: str, where: str) -> None:
        with open(self.root / "proc/self/mountinfo", "a") as f:
            f.write(f"30 1 {devno} / {where} rw,relatime - ext4 /dev/x rw\n")

    def open_fd(self, pid: int, comm: str, target: str) -> None:
        _w(self.root / f"proc/{pid}/comm", comm + "\n")
        _ln(self.root / f"proc/{pid}/fd/3", target)


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    h = FakeHost(tmp_path)
    h.pci(FREE)
    h.ctrl(FREE, "nvme0", "nvme0n1", "259:0")
    h.pci(BOOT)
    h.ctrl(BOOT, "nvme1", "nvme1n1", "259:1")
    h.blk("nvme1n1p1", "259:2", parent="nvme1n1")
    h.blk("nvme1n1p2", "259:3", parent="nvme1n1")
    h.mount("259:2", "/")
    with open(tmp_path / "proc/swaps", "a") as f:
        f.write("/dev/nvme1n1p2 partition 1048572 0 -2\n")
    h.pci(STACKED, group="12")
    h.ctrl(STACKED, "nvme2", "nvme2n1", "259:4", hidden="nvme2c2n1")
    h.holder("nvme2n1", "dm-0", "254:0")
    h.mount("254:0", "/data")
    h.pci(OPEN)
    h.ctrl(OPEN, "nvme3", "nvme3n1", "259:5")
    h.open_fd(4242, "fio", "/dev/nvme3n1")
    h.pci(BRIDGE, cls="0x060100", driver=None)
    return h


class KernelSysfs(devices.Sysfs):
    """Sysfs whose writes have the kernel's effect on driver links; records every write."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.writes: list[tuple[str, str]] = []

    def write(self, p: str, value: str) -> None:
        super().write(p, value)
        self.writes.append((p, value))
        if p.endswith("/driver/unbind"):
            (self.path(p).parent.parent / "driver").unlink()  # the link, not the driver directory
        elif p == "/sys/bus/pci/drivers_probe":
            dev = self.path(f"/sys/bus/pci/devices/{value}")
            want = (dev / "driver_override").read_text().strip()
            name = want if want and want != "(null)" else "nvme"
            if not (dev / "driver").is_symlink() and self.exists(f"/sys/bus/pci/drivers/{name}"):
                _ln(dev / "driver", f"../../drivers/{name}")


# ---- addresses ----
@pytest.mark.parametrize(
    "text,want", [("0000:4A:00.0", "0000:4a:00.0"), ("4a:00.1", "0000:4a:00.1"), ("0001:00:1f.7", "0001:00:1f.7")]
)
def test_parse_address(text: str, want: str) -> None:
    assert devices.parse_address(text) == want


@pytest.mark.parametrize("text", ["", "4a:00", "0:4a:00.0", "0000:4a:00.8", "0000:4a:20.0", "*", "0000:4a:00.0 "])
def test_parse_address_rejects(text: str) -> None:
    with pytest.raises(devices.DeviceError, match="not a PCI address"):
        devices.parse_address(text)


# ---- discovery and the busy rules ----
def test_list_functions(host: FakeHost) -> None:
    fns = {f.address: f for f in devices.list_functions(devices.Sysfs(host.root))}
    assert sorted(fns) == [FREE, BOOT, STACKED, OPEN]  # the bridge is not listed
    assert fns[FREE].free and fns[FREE].block_devices == ["nvme0n1"] and fns[FREE].driver == "nvme"
    assert fns[BOOT].block_devices == ["nvme1n1", "nvme1n1p1", "nvme1n1p2"]
    assert "boot device (/dev/nvme1n1p1 mounted on /)" in fns[BOOT].busy
    assert "swap (/dev/nvme1n1p2)" in fns[BOOT].busy
    assert fns[STACKED].block_devices == ["nvme2n1", "dm-0"]  # multipath head name from nvme2c2n1
    assert fns[STACKED].iommu_group == "12"
    assert "mounted (/dev/dm-0 on /data)" in fns[STACKED].busy
    assert "held by dm-0 (stacked on /dev/nvme2n1)" in fns[STACKED].busy
    assert fns[OPEN].busy == ["/dev/nvme3n1 open by pid 4242 (fio)"]


def test_root_on_cmdline_is_boot_device(host: FakeHost) -> None:
    _ln(host.root / "dev/disk/by-uuid/abcd", "../../nvme0n1")
    _w(host.root / "proc/cmdline", "ro root=UUID=abcd quiet\n")
    assert devices.busy_reasons(FREE, devices.Sysfs(host.root)) == [
        "boot device (root=/dev/nvme0n1 on the kernel command line)"
    ]


def test_open_controller_and_uio_nodes(host: FakeHost) -> None:
    host.open_fd(77, "nvme-cli", "/dev/nvme0")
    assert devices.busy_reasons(FREE, devices.Sysfs(host.root)) == ["/dev/nvme0 open by pid 77 (nvme-cli)"]
    (host.root / "sys/bus/pci/devices" / FREE / "uio/uio3").mkdir(parents=True)
    host.open_fd(78, "spdk", "/dev/uio3")
    assert "/dev/uio3 open by pid 78 (spdk)" in devices.busy_reasons(FREE, devices.Sysfs(host.root))


# ---- bind / unbind ----
@pytest.mark.parametrize("addr,why", [(BOOT, "boot device"), (STACKED, "mounted"), (OPEN, "open by pid 4242")])
def test_bind_refuses_busy_and_writes_nothing(host: FakeHost, addr: str, why: str) -> None:
    fs = KernelSysfs(host.root)
    with pytest.raises(devices.RefusedError, match=f"refusing {addr}: .*{why}"):
        devices.bind(addr, "uio_pci_generic", fs)
    assert fs.writes == []
    assert fs.link_name(f"/sys/bus/pci/devices/{addr}/driver") == "nvme"


def test_unbind_refuses_busy(host: FakeHost) -> None:
    fs = KernelSysfs(host.root)
    with pytest.raises(devices.RefusedError, match="boot device"):
        devices.unbind(BOOT, fs=fs)
    assert fs.writes == []


@pytest.mark.parametrize(
    "addr,driver,err",
    [
        ("", "uio_pci_generic", "not a PCI address"),
        ("0000:00:1e.0", "uio_pci_generic", "no PCI function 0000:00:1e.0"),
        (BRIDGE, "uio_pci_generic", "not an NVMe controller"),
        (FREE, "nvme", "driver must be"),
        (FREE, "vfio-pci", "no IOMMU group"),
    ],
)
def test_bind_rejects(host: FakeHost, addr: str, driver: str, err: str) -> None:
    fs = KernelSysfs(host.root)
    with pytest.raises(devices.DeviceError, match=err):
        devices.bind(addr, driver, fs)
    assert fs.writes == []


def test_bind_and_unbind_move_one_function(host: FakeHost) -> None:
    fs = KernelSysfs(host.root)
    f = devices.bind(FREE, "uio_pci_generic", fs)
    assert f.driver == "uio_pci_generic"
    pci = f"/sys/bus/pci/devices/{FREE}"
    assert fs.writes == [
        (f"{pci}/driver/unbind", FREE),
        (f"{pci}/driver_override", "uio_pci_generic"),
        ("/sys/bus/pci/drivers_probe", FREE),
    ]
    # nothing else changed driver
    for other in (BOOT, STACKED, OPEN):
        assert fs.link_name(f"/sys/bus/pci/devices/{other}/driver") == "nvme"
    assert devices.bind(FREE, "uio_pci_generic", fs).driver == "uio_pci_generic"  # idempotent, no writes
    assert len(fs.writes) == 3
    f = devices.unbind(FREE, fs=fs)
    assert f.driver == "nvme"
    assert fs.writes[3:] == [
        (f"{pci}/driver/unbind", FREE),
        (f"{pci}/driver_override", "\n"),
        ("/sys/bus/pci/drivers_probe", FREE),
    ]


def test_bind_vfio_with_group(host: FakeHost) -> None:
    fs = KernelSysfs(host.root)
    _ln(host.root / "sys/bus/pci/devices" / FREE / "iommu_group", "../../../kernel/iommu_groups/3")
    assert devices.bind(FREE, "vfio-pci", fs).driver == "vfio-pci"
    host.open_fd(99, "python", "/dev/vfio/3")  # a process holds the group: unbind must refuse
    with pytest.raises(devices.RefusedError, match="/dev/vfio/3 open by pid 99"):
        devices.unbind(FREE, fs=fs)


def test_bind_reports_probe_failure(host: FakeHost) -> None:
    fs = devices.Sysfs(host.root)  # plain writes: the "kernel" never binds
    with pytest.raises(devices.DeviceError, match="did not bind to uio_pci_generic"):
        devices.bind(FREE, "uio_pci_generic", fs)


def test_bind_needs_loaded_driver(host: FakeHost) -> None:
    shutil.rmtree(host.root / "sys/bus/pci/drivers/uio_pci_generic")
    with pytest.raises(devices.DeviceError, match="modprobe uio_pci_generic"):
        devices.bind(FREE, "uio_pci_generic", KernelSysfs(host.root))


# ---- hugepages ----
def test_hugepages(host: FakeHost) -> None:
    fs = devices.Sysfs(host.root)
    hp = host.root / "sys/kernel/mm/hugepages/hugepages-2048kB"
    _w(hp / "free_hugepages", "64\n")
    state = devices.hugepages(64, "2M", fs)
    assert (hp / "nr_hugepages").read_text() == "64"
    assert (state.total, state.free, state.size_kb) == (64, 64, 2048)
    _w(hp / "nr_hugepages", "10\n")  # what a fragmented kernel reports back
    assert devices.hugepages(None, "2M", fs).total == 10
    with pytest.raises(devices.DeviceError, match="size must be"):
        devices.hugepages(1, "4M", fs)
    with pytest.raises(devices.DeviceError, match=">= 0"):
        devices.hugepages(-1, "2M", fs)


def test_hugepages_short_reservation(host: FakeHost) -> None:
    class Stingy(devices.Sysfs):
        def write(self, p: str, value: str) -> None:
            super().write(p, str(min(int(value), 5)))

    hp = host.root / "sys/kernel/mm/hugepages/hugepages-2048kB"
    _w(hp / "nr_hugepages", "3\n")
    with pytest.raises(devices.DeviceError, match="reserve only 5; left at 3"):
        devices.hugepages(8, "2M", Stingy(host.root))
    assert (hp / "nr_hugepages").read_text().strip() == "3"  # the short reservation was given back


# ---- the command line ----
def test_cli(host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    r = str(host.root)
    assert cli_main(["devices", "--root", r]) == 0
    out = capsys.readouterr().out
    assert FREE in out and "busy: /dev/nvme3n1 open by pid 4242 (fio)" in out and BRIDGE not in out
    assert cli_main(["bind", BOOT, "--driver", "uio_pci_generic", "--root", r]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refusing 0000:00:05.0: boot device" in err[0]
    assert cli_main(["unbind", "nonsense", "--root", r]) == 2
    assert "not a PCI address" in capsys.readouterr().err


def test_one_in_use_check() -> None:
    """Python presents the driver's check (no copy of the rules): same limit, same code path."""
    from nvmelab import _native

    assert devices.MAX_BLOCK_DEVICES == _native.PCI_INUSE_MAX_BLK
    src = (ROOT / "src/nvmelab/host/devices.py").read_text()
    assert "pci_in_use" in src and "/holders" not in src and "/proc/cmdline" not in src


# ---- the C twin agrees ----
@pytest.fixture(scope="module")
def devmgmt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    exe = tmp_path_factory.mktemp("devmgmt") / "devmgmt"
    subprocess.run(
        [
            cc,
            "-std=c11",
            "-O1",
            "-Wall",
            "-Werror",
            "-D_GNU_SOURCE",
            "-DDM_STANDALONE",
            f"-I{ROOT / 'src'}",
            "-o",
            str(exe),
            str(ROOT / "src/tools/devmgmt.c"),
            str(ROOT / "src/nvme/inuse.c"),
            str(ROOT / "src/nvme/sysfs.c"),
        ],
        check=True,
    )
    return exe


def _c(exe: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe), *args, "--root", str(root)], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("addr", [FREE, BOOT, STACKED, OPEN])
def test_c_twin_same_verdicts(host: FakeHost, devmgmt: Path, addr: str) -> None:
    py = devices.busy_reasons(addr, devices.Sysfs(host.root))
    r = _c(devmgmt, host.root, "check", addr)
    assert r.returncode == (1 if py else 0), r.stdout + r.stderr
    c_reasons = r.stdout.strip().split(": ", 1)[1].split("; ") if py else []
    assert sorted(c_reasons) == sorted(py)
    if py:  # the bind refusal says the same and changes nothing
        r = _c(devmgmt, host.root, "bind", addr, "--driver", "uio_pci_generic")
        assert r.returncode == 1 and f"refusing {addr}" in r.stdout
        assert os.readlink(host.root / f"sys/bus/pci/devices/{addr}/driver").endswith("/nvme")


def test_c_twin_lists_the_same(host: FakeHost, devmgmt: Path) -> None:
    r = _c(devmgmt, host.root, "devices")
    assert r.returncode == 0
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines()}
    for f in devices.list_functions(devices.Sysfs(host.root)):
        row = rows.pop(f.address)
        assert f" driver={f.driver} " in row
        assert sorted(row.split(" blk=")[1].split()[0].split(",")) == sorted(f.block_devices)
        assert (" state=free" in row) == f.free
    assert rows == {}  # nothing the Python side did not list (the bridge is absent from both)


@pytest.mark.parametrize(
    "args,code,text",
    [
        (("bind", "0000:00:1e.0", "--driver", "uio_pci_generic"), 1, "no PCI function 0000:00:1e.0"),
        (("bind", BRIDGE, "--driver", "uio_pci_generic"), 1, "not an NVMe controller"),
        (("bind", FREE, "--driver", "vfio-pci"), 1, "no IOMMU group"),
        (("bind", "4a:00", "--driver", "vfio-pci"), 2, "not a PCI address"),
        (("bind", FREE, "--driver", "nvme"), 2, "driver must be"),
        (("hugepages", "4", "--size", "3M"), 2, "size must be"),
    ],
)
def test_c_twin_rejects(host: FakeHost, devmgmt: Path, args: tuple[str, ...], code: int, text: str) -> None:
    r = _c(devmgmt, host.root, *args)
    assert r.returncode == code and text in (r.stdout + r.stderr)


@pytest.mark.parametrize("case", ["unnumbered", "too_many"])
def test_unverifiable_devices_refuse_in_both_twins(host: FakeHost, devmgmt: Path, case: str) -> None:
    """A device the check cannot verify is a reason to refuse, never a pass; Python and C agree."""
    addr = FREE
    if case == "unnumbered":
        host.blk("nvme0n1p1", "259:9", parent="nvme0n1")
        (host.root / "sys/class/block/nvme0n1p1/dev").unlink()
        want = "cannot check /dev/nvme0n1p1 (no device number in sysfs)"
    else:
        for i in range(1, devices.MAX_BLOCK_DEVICES + 2):
            host.blk(f"nvme0n1p{i}", f"260:{i}", parent="nvme0n1")
        want = f"more than {devices.MAX_BLOCK_DEVICES} block devices: cannot check them all"
    py = devices.busy_reasons(addr, devices.Sysfs(host.root))
    assert py == [want]
    r = _c(devmgmt, host.root, "check", addr)
    assert r.returncode == 1 and r.stdout.strip().split(": ", 1)[1].split("; ") == [want], r.stdout + r.stderr
