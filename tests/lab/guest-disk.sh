#!/usr/bin/env bash
# The lab's guest disk (tests/common/lab.rs): Debian 12 with systemd, udev and the libraries ibi (built with the
# `agent` feature) links, on a 2 GiB raw disk, MBR, one ext4 partition booted by extlinux with a serial console.
# It stands in for an installed host (RHCOS after the factory phase) where the test needs a kernel, udev and
# systemd: each test boots a copy, with ibi's binary and units (and the test's own units) added by the harness.
#
# Usage: tests/lab/guest-disk.sh OUT.raw        (as root; built from Debian packages only)
# The harness caches OUT under ~/.cache/ibi/lab/ by this file's SHA-256: a change here builds a new one.
set -euo pipefail
out=$1
work=$(mktemp -d "$(dirname "$out")/guest-build.XXXXXX")
root="$work/root"
loop=""
mounted=""
cleanup() {
    [ -n "$mounted" ] && umount "$mounted" 2>/dev/null || true
    if [ -n "$loop" ]; then
        partx -d "$loop" 2>/dev/null || true
        losetup -d "$loop" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,udev,kmod,linux-image-amd64,libssl3,libostree-1-1,util-linux,coreutils \
    bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
chroot "$root" apt-get clean

# No logins, no first-boot questions; a persistent journal the test reads from the disk after power-off.
for unit in serial-getty@ttyS0.service getty@tty1.service systemd-firstboot.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
mkdir -p "$root/var/log/journal"
echo lab-guest >"$root/etc/hostname"
: >"$root/etc/machine-id"

kernel=$(basename "$(ls "$root"/boot/vmlinuz-* | head -1)")
initrd=$(basename "$(ls "$root"/boot/initrd.img-* | head -1)")

img="$work/disk.raw"
truncate -s 2G "$img"
echo 'start=2048, type=83, bootable' | sfdisk -q "$img"
loop=$(losetup -f --show "$img")
partx -a "$loop"
part="${loop}p1"
for _ in $(seq 1 50); do [ -b "$part" ] && break; sleep 0.1; done
mkfs.ext4 -q -O ^64bit -L lab-root "$part"
uuid=$(blkid -s UUID -o value "$part")
mkdir -p "$work/mnt"
mount "$part" "$work/mnt"
mounted="$work/mnt"
cp -a "$root/." "$work/mnt/"
echo "UUID=$uuid / ext4 defaults 0 1" >"$work/mnt/etc/fstab"
mkdir -p "$work/mnt/boot/extlinux"
cat >"$work/mnt/boot/extlinux/extlinux.conf" <<CONF
SERIAL 0 115200
DEFAULT lab
TIMEOUT 1
LABEL lab
    KERNEL /boot/$kernel
    INITRD /boot/$initrd
    APPEND root=UUID=$uuid ro console=ttyS0,115200n8 quiet systemd.show_status=false
CONF
extlinux --install "$work/mnt/boot/extlinux" 2>/dev/null
umount "$work/mnt"
mounted=""
partx -d "$loop"
losetup -d "$loop"
loop=""
dd if=/usr/lib/EXTLINUX/mbr.bin of="$img" bs=440 count=1 conv=notrunc status=none
mv "$img" "$out"
