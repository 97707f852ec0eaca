#!/usr/bin/env bash
# The lab's live ISO (tests/common/lab.rs): a bootable ISO in the CoreOS live layout, built from Debian 12
# packages, standing in for the RHCOS live ISO an installation ISO is made from:
#   images/pxeboot/vmlinuz, images/pxeboot/initrd.img   Debian's kernel; a dracut initramfs whose Ignition
#                                                       stage is Debian's own (package ignition, module 30ignition)
#   images/ignition.img                                 the embed area (256 KiB of zeros), appended as a second
#                                                       initrd, as on the CoreOS live ISO
#   coreos/igninfo.json, coreos/kargs.json              the embed-area descriptors `ibi create image --base-iso`
#                                                       and coreos-installer read
#   boot/grub/grub.cfg                                  grub-mkrescue's BIOS and UEFI boot, serial console, the
#                                                       kargs slot (kargs, newline, '#' padding, then the
#                                                       `# COREOS_KARG_EMBED_AREA` comment)
#   LiveOS/squashfs.img                                 the read-only live root (systemd, udev), under a tmpfs
#                                                       overlay at boot
# What Debian's Ignition module lacks, tests/lab/live/ adds as the dracut module 31ibi-lab-live: the copy of the
# embedded /config.ign to /usr/lib/ignition/user.ign (CoreOS's ignition-setup-user step), the live root mount,
# `is-live-image`, and a `setfiles` that does nothing (the live root has no SELinux policy; Debian's Ignition
# relabels all the same). Its 30ignition copy depends on `systemd` only: the VM has no network.
# On the live system, lab-live.service says on the serial console that it is up and what Ignition wrote to
# /etc/ibi-lab-ignition.
#
# Usage: tests/lab/live-iso.sh OUT.iso          (as root; Debian packages only; about 4 minutes)
set -euo pipefail
out=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "$(dirname "$out")/live-build.XXXXXX")
root="$work/root"
proc_mounted=""
cleanup() {
    [ -n "$proc_mounted" ] && umount "$proc_mounted" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
label=IBILAB

mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,udev,kmod,linux-image-amd64,dracut-core,ignition,util-linux,e2fsprogs \
    bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
chroot "$root" apt-get clean

# The live root: no logins; first boot (systemd applies Ignition's presets); no SELinux.
for unit in serial-getty@ttyS0.service getty@tty1.service systemd-firstboot.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
echo uninitialized >"$root/etc/machine-id"
echo live >"$root/etc/hostname"
mkdir -p "$root/etc/selinux"
printf 'SELINUX=disabled\nSELINUXTYPE=default\n' >"$root/etc/selinux/config"
install -m 0644 "$here/live/lab-live.service" "$root/etc/systemd/system/lab-live.service"
ln -sf /etc/systemd/system/lab-live.service "$root/etc/systemd/system/multi-user.target.wants/lab-live.service"

# The initramfs: Debian's Ignition module (network dependencies dropped) and the lab's live module.
modules="$root/usr/lib/dracut/modules.d"
cp -a "$modules/30ignition" "$modules/30ignition-lab"
rm -rf "$modules/30ignition"
sed -i 's/echo qemu systemd url-lib network/echo systemd/' "$modules/30ignition-lab/module-setup.sh"
mkdir -p "$modules/31ibi-lab-live"
for f in module-setup.sh ibi-lab-setup-user.service ibi-lab-live-root.service live-root.sh parse-live.sh \
    is-live-image setfiles after-sysroot.conf; do
    install -m 0755 "$here/live/$f" "$modules/31ibi-lab-live/$f"
done
kver=$(basename "$(ls -d "$root"/lib/modules/* | head -1)")
mount -t proc proc "$root/proc"
proc_mounted="$root/proc"
chroot "$root" dracut --quiet --no-hostonly --force --add "ignition-lab ibi-lab-live" \
    --omit "plymouth network dmsquash-live" /boot/initrd-live.img "$kver"
umount "$root/proc"
proc_mounted=""

stage="$work/stage"
mkdir -p "$stage/images/pxeboot" "$stage/LiveOS" "$stage/coreos" "$stage/boot/grub"
cp "$root/boot/vmlinuz-$kver" "$stage/images/pxeboot/vmlinuz"
cp "$root/boot/initrd-live.img" "$stage/images/pxeboot/initrd.img"
truncate -s 256K "$stage/images/ignition.img"
mksquashfs "$root" "$stage/LiveOS/squashfs.img" -comp xz -e boot -noappend -quiet -no-xattrs >/dev/null

default="root=live:CDLABEL=$label ignition.firstboot ignition.platform.id=metal console=ttyS0,115200n8"
size=1024
head="serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=1
menuentry 'ibi lab live' {
    linux /images/pxeboot/vmlinuz "
pad=$(printf '#%.0s' $(seq 1 $((size - ${#default} - 1))))
printf '%s%s\n%s# COREOS_KARG_EMBED_AREA\n    initrd /images/pxeboot/initrd.img /images/ignition.img\n}\n' \
    "$head" "$default" "$pad" >"$stage/boot/grub/grub.cfg"
printf '{"file": "images/ignition.img"}\n' >"$stage/coreos/igninfo.json"
printf '{"default": "%s", "files": [{"path": "boot/grub/grub.cfg", "offset": %d, "pad": "#", "end": "\\n"}], "size": %d}\n' \
    "$default" "${#head}" "$size" >"$stage/coreos/kargs.json"
grub-mkrescue -o "$work/live.iso" "$stage" -- -volid "$label" >"$work/mkrescue.log" 2>&1 ||
    { cat "$work/mkrescue.log"; exit 1; }
mv "$work/live.iso" "$out"
