#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Build the original blkhash `blksum` from a source tree for the side-by-side benchmark (make bench):
# two builds, as blkhash ships them: build/original/nbd (meson -Dnbd=enabled: every image is served by
# qemu-nbd and read with libnbd) and build/original/pread (-Dnbd=disabled: raw files read with pread).
# Nothing of blkhash is committed here: the source comes from BLKHASH_SRC (a git checkout or an
# unpacked release of https://gitlab.com/nirs/blkhash), is copied into build/original/src (git-ignored)
# and built there; its unit tests are left out (they fetch Unity from the network).
# usage: BLKHASH_SRC=/path/to/blkhash bash tests/bench/build_original.sh   (needs meson, ninja,
# libssl-dev, and libnbd-dev for the nbd build)
set -euo pipefail
SRC=${BLKHASH_SRC:?set BLKHASH_SRC to a blkhash source tree (git clone https://gitlab.com/nirs/blkhash)}
OUT=${BLKHASH_OUT:-build/original}
command -v meson >/dev/null || { echo "build_original.sh: meson not found (apt-get install meson ninja-build)" >&2; exit 1; }
rm -rf "$OUT/src" && mkdir -p "$OUT/src"
if [ -d "$SRC/.git" ] || [ -f "$SRC/HEAD" ]; then
    git --git-dir="$( [ -d "$SRC/.git" ] && echo "$SRC/.git" || echo "$SRC")" archive HEAD | tar -x -C "$OUT/src"
else
    cp -a "$SRC/." "$OUT/src/"
fi
sed -i "s/^subdir('test')/# subdir('test'): left out by nvmelab (Unity needs the network)/" "$OUT/src/meson.build"
for kind in nbd pread; do
    nbd=$([ $kind = nbd ] && echo enabled || echo disabled)
    rm -rf "$OUT/$kind"
    (cd "$OUT/src" && meson setup "../$kind" -Dnbd=$nbd -Dman=disabled -Dblake3=disabled --buildtype=release \
        >"../setup-$kind.log" 2>&1) || { echo "build_original.sh: meson setup ($kind) failed, see $OUT/setup-$kind.log" >&2; exit 1; }
    ninja -C "$OUT/$kind" >"$OUT/build-$kind.log" 2>&1 || { echo "build_original.sh: build ($kind) failed, see $OUT/build-$kind.log" >&2; exit 1; }
    echo "build_original.sh: $OUT/$kind/bin/blksum"
done
