#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nvmelab — QEMU with the vfio-user client (>= 10.1), built from Debian's source package for `make test-kernel`.
#
# Debian 12 ships QEMU 7.2 (no vfio-user-pci), so this takes the qemu SOURCE package of unstable:
#   1. a deb-src-only entry for sid in /etc/apt/sources.list.d/nvmelab-qemu-src.sources (no binary packages
#      come from it), `apt-get update` of that file alone, `apt-get source qemu[=VERSION]` into
#      env/qemu/work/qemu-src/ (dpkg-source applies Debian's patches);
#   2. Meson: QEMU needs >= 1.5 and Debian 12 has 1.0; Debian's repacked source drops QEMU's bundled wheels, so
#      the wheel of the version QEMU's pythondeps.toml installs is fetched with pip into the source tree's
#      python/wheels, where QEMU's configure looks (its own virtual environment, nothing installed system-wide);
#   3. configure + ninja into env/qemu/work/qemu-build: x86_64-softmmu only, every optional feature off but
#      TCG and KVM (--without-default-features), no docs, tools, guest agent or firmware blobs (the guest boots
#      with Debian's SeaBIOS and option ROMs: --firmwarepath).
# The result is cached: a second run with the same source version and flags builds nothing.
# Prints the path of qemu-system-x86_64 on stdout; everything else goes to stderr.
#
# Usage: env/qemu/qemu-build.sh        (root: it writes /etc/apt/sources.list.d and runs apt-get)
# Environment: NVMELAB_QEMU_SRC_VERSION  the Debian version to build (default below; "newest" = what sid has)
#              NVMELAB_QEMU_JOBS          ninja's -j (default: the number of CPUs)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=${NVMELAB_QEMU_WORK:-$HERE/work}
SRC_ROOT="$WORK/qemu-src"
BUILD="$WORK/qemu-build"
# the version this recipe was last run with (env/qemu/README.md); sid moves on, so a missing one falls back to
# the newest, which must still be >= QEMU_MIN
QEMU_SRC_VERSION=${NVMELAB_QEMU_SRC_VERSION:-1:10.2.2+ds-1}
QEMU_MIN=1:10.1
JOBS=${NVMELAB_QEMU_JOBS:-$(nproc)}
APT_SRC_FILE=/etc/apt/sources.list.d/nvmelab-qemu-src.sources
CONFIGURE_FLAGS=(--target-list=x86_64-softmmu --python=/usr/bin/python3 --disable-download
    --without-default-features --enable-tcg --enable-kvm --enable-fdt=system
    --disable-docs --disable-tools --disable-guest-agent --disable-install-blobs
    --firmwarepath=/usr/share/qemu:/usr/share/seabios)

log() { printf '[qemu-build] %s\n' "$*" >&2; }
die() { printf '[qemu-build] error: %s\n' "$*" >&2; exit 2; }

# --- 1. the source package ---
if [ ! -f "$APT_SRC_FILE" ]; then
    [ "$(id -u)" = 0 ] || die "root is needed to add $APT_SRC_FILE (deb-src for sid)"
    log "adding $APT_SRC_FILE (deb-src only: QEMU's source package from sid)"
    cat > "$APT_SRC_FILE" <<'EOF'
# nvmelab (env/qemu/qemu-build.sh): source packages of unstable, for QEMU >= 10.1 (make test-kernel).
# deb-src only: no binary package is ever installed from here.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi
apt_src_update() {
    log "apt-get update ($APT_SRC_FILE only)"
    apt-get update -q -o Dir::Etc::sourcelist="$APT_SRC_FILE" -o Dir::Etc::sourceparts=- \
        -o APT::Get::List-Cleanup=0 >&2 || die "apt-get update of $APT_SRC_FILE failed"
}
srcdir_of() { # srcdir_of VERSION: the folder dpkg-source makes (epoch and Debian revision dropped)
    local v=${1#*:}
    echo "$SRC_ROOT/qemu-${v%-*}"
}
want=$QEMU_SRC_VERSION
if [ "$want" = newest ] || [ ! -f "$(srcdir_of "$want")/.nvmelab-extracted" ]; then
    apt_src_update
    have=$(apt-cache showsrc qemu 2>/dev/null | awk '/^Version:/{print $2}' | sort -u)
    [ -n "$have" ] || die "apt-cache showsrc qemu: no source package (is deb.debian.org reachable?)"
    newest=$(printf '%s\n' "$have" | sort -V | tail -n1)
    if [ "$want" = newest ]; then
        want=$newest
    elif ! grep -qxF "$want" <<<"$have"; then
        log "qemu $want is no longer in sid's sources; taking the newest, $newest"
        want=$newest
    fi
    dpkg --compare-versions "$want" ge "$QEMU_MIN" || die "qemu $want is older than $QEMU_MIN (no vfio-user client)"
fi
SRC=$(srcdir_of "$want")
if [ ! -f "$SRC/.nvmelab-extracted" ]; then
    mkdir -p "$SRC_ROOT"
    rm -rf "$SRC"
    log "apt-get source qemu=$want into $SRC_ROOT"
    (cd "$SRC_ROOT" && apt-get source -q -o APT::Sandbox::User=root "qemu=$want" >&2) || die "apt-get source qemu=$want failed"
    [ -d "$SRC" ] || die "apt-get source made no $SRC"
    touch "$SRC/.nvmelab-extracted"
fi

# --- 2. Meson's wheel, the version QEMU's pythondeps.toml installs ---
MESON_VER=$(awk -F'"' '/^\[meson\]/{s=1; next} /^\[/{s=0}
    s && /^meson *=/ {for (i = 1; i < NF; i++) if ($i ~ /installed *= *$/) print $(i+1)}' "$SRC/pythondeps.toml")
[ -n "$MESON_VER" ] || die "no Meson version in $SRC/pythondeps.toml"
if ! ls "$SRC/python/wheels/meson-$MESON_VER-"*.whl >/dev/null 2>&1; then
    log "fetching the Meson $MESON_VER wheel (pip download) into $SRC/python/wheels"
    mkdir -p "$SRC/python/wheels"
    /usr/bin/python3 -m pip download -q --no-deps --only-binary=:all: -d "$SRC/python/wheels" "meson==$MESON_VER" >&2 \
        || die "pip download meson==$MESON_VER failed"
fi

# --- 3. configure + build, cached by (source version, flags) ---
STAMP="$want ${CONFIGURE_FLAGS[*]}"
BIN="$BUILD/qemu-system-x86_64"
if [ -x "$BIN" ] && [ "$(cat "$BUILD/.nvmelab-built" 2>/dev/null)" = "$STAMP" ]; then
    log "cached: $("$BIN" --version | head -n1) ($want)"
    echo "$BIN"
    exit 0
fi
if [ "$(cat "$BUILD/.nvmelab-configured" 2>/dev/null)" != "$STAMP" ]; then
    rm -rf "$BUILD"; mkdir -p "$BUILD"
    log "configure (log: $BUILD/configure.log)"
    (cd "$BUILD" && "$SRC/configure" "${CONFIGURE_FLAGS[@]}" > configure.log 2>&1) || {
        tail -n 20 "$BUILD/configure.log" >&2; die "configure failed"; }
    echo "$STAMP" > "$BUILD/.nvmelab-configured"
fi
t0=$(date +%s)
log "ninja -j$JOBS qemu-system-x86_64 (log: $BUILD/ninja.log; about 7 min on 2 cores)"
(cd "$BUILD" && ninja -j"$JOBS" qemu-system-x86_64 > ninja.log 2>&1) || { tail -n 30 "$BUILD/ninja.log" >&2; die "the build failed"; }
echo "$STAMP" > "$BUILD/.nvmelab-built"
log "built $("$BIN" --version | head -n1) in $(( $(date +%s) - t0 )) s"
echo "$BIN"
