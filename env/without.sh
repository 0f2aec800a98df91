#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nvmelab — run a command as if some Debian packages were not installed, without removing them.
#
# usage: env/without.sh PACKAGE... -- COMMAND [ARG...]
#
# For a shared machine where `apt-get remove` would take tools away from others (and where there is
# no container engine): COMMAND runs in a private mount namespace (root, unshare) in which every
# regular file of the named packages is covered by an empty file with no permissions. Executables
# are then not found (`command -v`, shutil.which), headers and libraries are empty, so anything
# that still uses them fails loudly. Nothing outside COMMAND's process tree sees a change.
# Example (the bare-machine check of src/README.md):
#   env/without.sh fio valgrind chromium qemu-system-x86 busybox-static stress-ng -- make book
set -euo pipefail
pkgs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do pkgs+=("$1"); shift; done
[ $# -gt 1 ] && [ ${#pkgs[@]} -gt 0 ] || { sed -n '5,6p' "$0" >&2; exit 2; }
shift
[ "$(id -u)" = 0 ] || { echo "without.sh: needs root (a private mount namespace)" >&2; exit 2; }
command -v unshare >/dev/null || { echo "without.sh: unshare not found (Debian package util-linux)" >&2; exit 2; }

export NVMELAB_WITHOUT="${pkgs[*]}"
exec unshare --mount --propagation private bash -c '
    set -euo pipefail
    empty=$(mktemp /tmp/nvmelab-without.XXXXXX)
    chmod 000 "$empty"
    n=0
    for pkg in $NVMELAB_WITHOUT; do
        if ! files=$(dpkg-query -L "$pkg" 2>/dev/null); then
            echo "without.sh: $pkg is not installed (nothing to hide)" >&2
            continue
        fi
        while IFS= read -r f; do
            if [ -f "$f" ] && [ ! -L "$f" ]; then mount --bind "$empty" "$f"; n=$((n + 1)); fi
        done <<< "$files"
    done
    rm -f "$empty"   # the bind mounts keep the inode
    echo "without.sh: hid $n files of: $NVMELAB_WITHOUT" >&2
    exec "$@"
' without "$@"
