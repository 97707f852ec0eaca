#!/usr/bin/env bash
# Builds a fake RHCOS metal disk image, what `coreos-installer install` leaves on the disk, for the
# end-to-end test of `ibi agent install` (issue 4 item 6; lifecycle-agent reference §4.2–4.5):
#   GPT, partitions laid out and numbered as in RHCOS metal images (scaled to the image size):
#     1 BIOS-BOOT   1 MiB    BIOS boot, empty
#     2 EFI-SYSTEM  127 MiB  vfat (label EFI-SYSTEM); left empty when mkfs.vfat is missing (apt: dosfstools)
#     3 boot        384 MiB  ext4, label boot: BLS entries, kernel and initramfs of the deployment
#     4 root        the rest xfs, label root (at least 300 MB: mkfs.xfs refuses less), holding an ostree
#                   sysroot (`ostree admin init-fs`, `os-init rhcos`, sysroot.bootloader=none as RHCOS)
#                   with one deployment in stateroot rhcos of a tiny commit (kernel and initramfs under
#                   usr/lib/modules/<kver>, os-release, usr/etc, usr/bin/sh)
#   The boot partition is mounted at <root>/boot during the deploy, so the BLS entry and the kernel land
#   on it as on RHCOS; root's own /boot stays an empty mount point. To read the deployment list
#   (`ostree admin status`) mount root, then boot at <root>/boot: libostree finds deployments through
#   the boot loader entries.
# Partitions are reached by attaching their byte ranges as loop devices (this kernel exposes no
# partitions of loop devices); the mounts and loop devices are undone by a trap on every exit path,
# and a failed run leaves no image behind (it is built as OUT.img.tmp and renamed at the end).
# Fixed where the tools allow: GPT disk and partition GUIDs, filesystem UUIDs, the commit's timestamp
# (so its checksum, printed at the end, is the same on every run). Not fixed: the filesystems' own
# timestamps and layouts, and what `ostree admin deploy` writes (deployment dir mtimes, origin).
#
# Usage: make-metal-image.sh OUT.img [SIZE]     SIZE as for truncate(1), default 1G, at least 832M
# Needs root, loop devices, sfdisk (fdisk), mkfs.ext4 (e2fsprogs), mkfs.xfs (xfsprogs), ostree,
# losetup/mount (util-linux); mkfs.vfat (dosfstools) optional.
set -euo pipefail
export LC_ALL=C TZ=UTC
umask 022

[ $# -ge 1 ] && [ $# -le 2 ] || {
    echo "usage: $0 OUT.img [SIZE]" >&2
    exit 2
}
out=$1
size=${2:-1G}

# GRUB_EFI=1: EFI-SYSTEM gets a GRUB (EFI/BOOT/BOOTX64.EFI) that boots the deployment of ostree's boot
# loader entry, for the lab's VM (needs mkfs.vfat, grub-mkstandalone with x86_64-efi, mtools).
grub_efi=${GRUB_EFI:-0}
mib=$((1024 * 1024))
kver=5.14.0-427.13.1.el9_4.x86_64
mtime=2024-05-14T00:00:00Z
# Sector layout (512-byte sectors) of an RHCOS 4.16 metal image; root runs to the end of the image.
bios_start=2048 bios_sectors=2048
efi_start=4096 efi_sectors=260096
boot_start=264192 boot_sectors=786432
root_start=1050624
min_root_bytes=$((300 * 1000 * 1000))

[ "$(id -u)" = 0 ] || {
    echo "$0: needs root (loop devices, mounts)" >&2
    exit 1
}
for tool in sfdisk mkfs.ext4 mkfs.xfs ostree losetup mount umount truncate; do
    command -v "$tool" >/dev/null || {
        echo "$0: $tool is not installed" >&2
        exit 1
    }
done

tmp_img=$out.tmp
work=$(mktemp -d)
loops=()
mounts=()
cleanup() {
    local rc=$? i
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        # Never lazily: a detached filesystem with this image's fixed UUIDs would stay alive and block
        # every later mount of one.
        umount "${mounts[i]}" || echo "$0: could not unmount ${mounts[i]}" >&2
    done
    for dev in "${loops[@]}"; do
        losetup -d "$dev" || true
    done
    rm -rf "$work"
    [ "$rc" = 0 ] || rm -f "$tmp_img"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# attach START_SECTOR SECTORS: a loop device over that byte range of the image, in $dev (not printed:
# a command substitution would record it in a subshell's copy of $loops, out of the trap's reach).
attach() {
    dev=$(losetup -f --show -o $(($1 * 512)) --sizelimit $(($2 * 512)) "$tmp_img")
    loops+=("$dev")
    # Kernel partitions an earlier user of this loop device added (partx) and left when detaching it
    # would make mkfs refuse the device.
    partx -d "$dev" 2>/dev/null || true
}
mount_at() {
    mount "$@"
    mounts+=("${!#}")
}

rm -f "$tmp_img"
truncate -s "$size" "$tmp_img"
bytes=$(stat -c %s "$tmp_img")
# The backup GPT takes the last 33 sectors; root ends on a MiB boundary before them, as sfdisk leaves it.
root_end=$(((bytes - 33 * 512) / mib * mib / 512))
root_sectors=$((root_end - root_start))
if [ "$root_sectors" -le 0 ] || [ $((root_sectors * 512)) -lt "$min_root_bytes" ]; then
    echo "$0: size $size leaves root under 300 MB (mkfs.xfs minimum); use at least 832M" >&2
    exit 1
fi

sfdisk -q "$tmp_img" <<EOF
label: gpt
label-id: 00000000-0000-4000-A000-1B1F1C7B0001
first-lba: 34
start=$bios_start, size=$bios_sectors, type=21686148-6449-6E6F-744E-656564454649, uuid=00000000-0000-4000-A000-1B1F1C7B0011, name="BIOS-BOOT"
start=$efi_start, size=$efi_sectors, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, uuid=00000000-0000-4000-A000-1B1F1C7B0012, name="EFI-SYSTEM"
start=$boot_start, size=$boot_sectors, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, uuid=00000000-0000-4000-A000-1B1F1C7B0013, name="boot"
start=$root_start, size=$root_sectors, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, uuid=00000000-0000-4000-A000-1B1F1C7B0014, name="root"
EOF

attach $efi_start $efi_sectors
efi=$dev
if command -v mkfs.vfat >/dev/null; then
    mkfs.vfat -n EFI-SYSTEM -i 1B1F0002 "$efi" >/dev/null
elif [ "$grub_efi" = 1 ]; then
    echo "$0: GRUB_EFI=1 needs mkfs.vfat (apt: dosfstools)" >&2
    exit 1
else
    echo "$0: mkfs.vfat is missing (apt: dosfstools): EFI-SYSTEM left unformatted" >&2
fi
if [ "$grub_efi" = 1 ]; then
    # What RHCOS's boot loader does with ostree's BLS entry, done by GRUB script (Debian's GRUB 2.06 has
    # no blscfg): read the entry's options, find the kernel and initramfs of the deployment `ostree=`
    # names, boot them with those options. root=LABEL=root stands in for RHCOS's initramfs, which finds
    # its root by label (the agent writes no root= karg, as lca-cli does not).
    cat >"$work/grub.cfg" <<'CFG'
serial --unit=0 --speed=115200
terminal_input serial
terminal_output serial
insmod part_gpt
insmod ext2
insmod regexp
search --no-floppy --set=boot --label boot
set bls_options=""
function title { true; }
function version { true; }
function options { set bls_options="$*"; }
# The entry is read while root is still GRUB's own memdisk: its `linux` and `initrd` lines then fail to
# find their files instead of loading them once without the options (a second load of the initramfs
# finds no room: "the initrd is too big").
for entry in ($boot)/loader/entries/*.conf; do
    if [ -f "$entry" ]; then
        echo "IBI-LAB: boot loader entry $entry"
        source "$entry"
    fi
done
set root=$boot
if regexp --set=1:osname --set=2:bootcsum 'ostree=/ostree/boot\.[01]/([^/ ]+)/([0-9a-f]+)/' "$bls_options"; then
    for k in /ostree/${osname}-${bootcsum}/vmlinuz-*; do set kernel="$k"; done
    for i in /ostree/${osname}-${bootcsum}/initramfs-*.img; do set initramfs="$i"; done
    echo "IBI-LAB: booting $kernel $bls_options"
    linux $kernel $bls_options root=LABEL=root rw console=ttyS0,115200n8
    initrd $initramfs
    boot
fi
echo "IBI-LAB: boot loader found no ostree entry"
sleep 10
halt
CFG
    grub-mkstandalone -O x86_64-efi -o "$work/BOOTX64.EFI" "boot/grub/grub.cfg=$work/grub.cfg"
    mmd -i "$efi" ::/EFI ::/EFI/BOOT
    mcopy -i "$efi" "$work/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI
fi
attach $boot_start $boot_sectors
boot=$dev
mkfs.ext4 -q -F -L boot -U 1b1f0003-0000-4000-a000-000000000003 "$boot"
attach $root_start $root_sectors
root=$dev
mkfs.xfs -q -f -L root -m uuid=1b1f0004-0000-4000-a000-000000000004 "$root"

mnt=$work/root
mkdir -p "$mnt"
mount_at -t xfs "$root" "$mnt"
ostree admin init-fs "$mnt"
mount_at -t ext4 "$boot" "$mnt/boot"
ostree admin os-init rhcos --sysroot="$mnt"
ostree config --repo="$mnt/ostree/repo" set sysroot.bootloader none

tree=$work/tree
mkdir -p "$tree/usr/lib/modules/$kver" "$tree/usr/etc" "$tree/usr/bin"
printf 'rhcos fixture kernel %s\n' "$kver" >"$tree/usr/lib/modules/$kver/vmlinuz"
printf 'rhcos fixture initramfs %s\n' "$kver" >"$tree/usr/lib/modules/$kver/initramfs.img"
printf '%s\n' 'NAME="Red Hat Enterprise Linux CoreOS"' 'ID="rhcos"' 'VERSION="416.94.202405010000-0"' \
    'PRETTY_NAME="Red Hat Enterprise Linux CoreOS 416.94.202405010000-0 (ibi metal fixture)"' \
    >"$tree/usr/lib/os-release"
printf 'localhost\n' >"$tree/usr/etc/hostname"
printf '#!/bin/sh\nexit 0\n' >"$tree/usr/bin/sh"
chmod 0755 "$tree/usr/bin/sh"
checksum=$(ostree commit --repo="$mnt/ostree/repo" --orphan --tree=dir="$tree" --timestamp="$mtime" \
    --owner-uid=0 --owner-gid=0 --no-xattrs --subject="ibi metal fixture" \
    --add-metadata-string=version=416.94.202405010000-0)
ostree admin deploy --sysroot="$mnt" --os=rhcos --karg=rw --karg=root=LABEL=root \
    --karg=rootflags=prjquota --karg=boot=LABEL=boot --karg=ignition.platform.id=metal "$checksum"
[ -d "$mnt/ostree/deploy/rhcos/deploy/$checksum.0" ] || {
    echo "$0: ostree admin deploy made no $checksum.0" >&2
    exit 1
}
sync -f "$mnt" "$mnt/boot"

# Undo in order now, so a failure to unmount is an error, not something the trap hides.
umount "$mnt/boot" && unset 'mounts[1]'
umount "$mnt" && unset 'mounts[0]'
for dev in "${loops[@]}"; do losetup -d "$dev"; done
loops=()
mv -f "$tmp_img" "$out"
echo "metal image: $out ($bytes bytes, root partition 4 from LBA $root_start, rhcos commit $checksum)"
