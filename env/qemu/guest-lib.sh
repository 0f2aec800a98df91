# SPDX-License-Identifier: BSD-3-Clause
# nvmelab QEMU guest: the parts every guest recipe shares (sourced by run.sh, `make test-qemu`, and kernel.sh,
# `make test-kernel`): the Debian kernel, the modules closed over their dependencies, the busybox initramfs,
# dynamically linked host programs copied in with their libraries, and the accelerator probe.
#
#   guest_kernel META           -> KVER, VMLINUZ (the image package META depends on, downloaded and unpacked once)
#   guest_modules "M1 M2 ..."   -> MODORDER (dependencies first), MODPATH (name -> .ko file)
#   guest_initramfs_base DIR    busybox, /etc/passwd and group, init, the modules of MODORDER (DIR made afresh)
#   guest_copy_program DIR EXE  EXE and every shared library `ldd` names, at their host paths (host and guest
#                               are both Debian amd64: the same loader and libc)
#   guest_initramfs_pack DIR OUT  cpio newc + gzip
#   guest_accel QEMU INITRD     kvm when /dev/kvm opens and a probe boot under KVM finishes, else tcg
#                               (QEMU_ACCEL=kvm|tcg skips the probe)
# The caller defines WORK (the cache folder), HERE (env/qemu), log and die (die exits).

guest_kernel() {
    local meta=$1 kpkg kdeb kx
    mkdir -p "$WORK/debs"
    kpkg=$(apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
    [ -n "$kpkg" ] || die "cannot resolve $meta to a kernel image package (apt-get update?)"
    kdeb=$(ls "$WORK"/debs/"${kpkg}"_*.deb 2>/dev/null | head -n1 || true)
    if [ -z "$kdeb" ]; then
        log "downloading $kpkg"
        (cd "$WORK/debs" && apt-get download -q -o APT::Sandbox::User=root "$kpkg" >/dev/null) || die "apt-get download $kpkg failed"
        kdeb=$(ls "$WORK"/debs/"${kpkg}"_*.deb | head -n1)
    fi
    kx="$WORK/kernel/$(basename "$kdeb" .deb)"
    if [ ! -f "$kx/.extracted" ]; then
        log "extracting $(basename "$kdeb")"
        rm -rf "$kx"; mkdir -p "$kx"
        dpkg-deb -x "$kdeb" "$kx"
        touch "$kx/.extracted"
    fi
    KX=$kx
    KVER=$(ls "$kx/lib/modules" | head -n1)
    VMLINUZ="$kx/boot/vmlinuz-$KVER"
    [ -f "$VMLINUZ" ] || die "no vmlinuz in $kdeb"
    log "kernel $KVER"
}

# guest_modules "M...": the modules we load, closed over `modinfo -F depends`, in load order
guest_modules() {
    local f b m
    declare -gA MODPATH=() MODSEEN=()
    MODORDER=()
    while IFS= read -r f; do
        b=$(basename "$f"); b=${b%%.ko*}; MODPATH[${b//-/_}]=$f
    done < <(find "$KX/lib/modules/$KVER/kernel" -name '*.ko*')
    for m in $1; do _guest_add_module "$m"; done
}
_guest_add_module() { # depth-first: dependencies before the module
    local m=${1//-/_} d
    [ -n "${MODSEEN[$m]:-}" ] && return 0
    MODSEEN[$m]=1
    if [ -z "${MODPATH[$m]:-}" ]; then
        grep -q "/${m}.ko\|/${1}.ko" "$KX/lib/modules/$KVER/modules.builtin" 2>/dev/null && return 0
        die "kernel module $1 is neither a module nor built in"
    fi
    for d in $(modinfo -F depends "${MODPATH[$m]}" | tr ',' ' '); do _guest_add_module "$d"; done
    MODORDER+=("$m")
}

guest_initramfs_base() {
    local ird=$1 m src
    rm -rf "$ird"; mkdir -p "$ird"/{bin,sbin,etc/nvmelab,proc,sys,dev,mnt,tmp,run,lib/modules}
    cp /bin/busybox "$ird/bin/busybox"
    printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' > "$ird/etc/passwd"   # a non-root user
    printf 'root:x:0:\nnogroup:x:65534:\n' > "$ird/etc/group"
    cp "$HERE/init" "$ird/init"; chmod 755 "$ird/init"
    : > "$ird/etc/nvmelab/modules"
    for m in "${MODORDER[@]}"; do
        src=${MODPATH[$m]}
        case "$src" in
            *.ko.xz) xz -dc "$src" > "$ird/lib/modules/$m.ko" ;;
            *.ko.zst) zstd -dqc "$src" > "$ird/lib/modules/$m.ko" ;;
            *) cp "$src" "$ird/lib/modules/$m.ko" ;;
        esac
        echo "$m" >> "$ird/etc/nvmelab/modules"
    done
}

guest_copy_program() {
    local ird=$1 exe=$2 lib
    [ -x "$exe" ] || die "$exe is not an executable"
    mkdir -p "$ird$(dirname "$exe")"
    cp -L "$exe" "$ird$exe"
    # `ldd` lines: "libx.so.1 => /lib/.../libx.so.1 (0x...)" and the loader "/lib64/ld-linux-x86-64.so.2 (0x...)"
    while IFS= read -r lib; do
        [ -e "$ird$lib" ] && continue
        mkdir -p "$ird$(dirname "$lib")"
        cp -L "$lib" "$ird$lib"
    done < <(ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
}

guest_initramfs_pack() {
    local ird=$1 out=$2
    (cd "$ird" && find . -print0 | sort -z | cpio --null -o -H newc --quiet | gzip -1 > "$out.tmp")
    mv "$out.tmp" "$out"
}

guest_accel() {
    local qemu=$1 initrd=$2
    case "$QEMU_ACCEL" in
        tcg|kvm) echo "$QEMU_ACCEL"; return ;;
    esac
    if [ -r /dev/kvm ] && [ -w /dev/kvm ] && \
       timeout 15 "$qemu" -accel kvm -machine q35 -cpu max -smp 1 -m 512M -nodefaults -display none \
           -no-reboot -serial stdio -monitor none -kernel "$VMLINUZ" -initrd "$initrd" \
           -append "console=ttyS0 panic=-1 loglevel=1 nvmelab.leg=probe" </dev/null 2>/dev/null | \
           grep -q '^NVMELAB-LEG probe'; then
        echo kvm
    else
        echo tcg
    fi
}
