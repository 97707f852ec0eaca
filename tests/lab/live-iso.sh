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
#   LiveOS/squashfs.img                                 the read-only live root (systemd, udev, podman, skopeo,
#                                                       libostree, xfsprogs, docker-registry, what lca-cli
#                                                       calls), under a tmpfs
#                                                       overlay at boot, container storage on its own tmpfs
# What Debian's Ignition module lacks, tests/lab/live/ adds as the dracut module 31ibi-lab-live: the copy of the
# embedded /config.ign to /usr/lib/ignition/user.ign (CoreOS's ignition-setup-user step), the live root mount,
# `is-live-image`, and a `setfiles` that does nothing (the live root has no SELinux policy; Debian's Ignition
# relabels all the same). Its 30ignition copy depends on `systemd` only: the VM has no network.
# The live root carries the lab's stand-ins and registry (tests/lab/live-root/, see below): the installation ISO
# ibi makes from this one runs `hostAgent: ibi` (fetching ibi from a registry) or `hostAgent: lca` (the
# seed's own lca-cli) as on RHCOS, with no network.
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

# What the installation ISO's host side runs on the live system: podman (fetch-ibi.sh, the install
# script and lca-cli), skopeo and libostree (ibi agent install), xfsprogs (the extra partition), and
# docker-registry for the lab's registry on the VM's loopback. For lifecycle-agent's lca-cli (hostAgent:
# lca) the tools it calls by name, from their Debian packages: ostree, sfdisk and blockdev (fdisk,
# util-linux), sgdisk (gdisk, lca-cli 4.18), growpart (cloud-guest-utils), lsblk and jq, restorecon
# (policycoreutils: without SELinux it relabels nothing and succeeds), chattr (e2fsprogs), and the disk
# cleanup's vgs/pvs/dmsetup (lvm2) and mdadm.
agent_parts=podman,netavark,skopeo,libostree-1-1,xfsprogs,fdisk,docker-registry
lca_parts=ostree,gdisk,cloud-guest-utils,jq,policycoreutils,lvm2,mdadm
mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,udev,kmod,linux-image-amd64,dracut-core,ignition,util-linux,e2fsprogs,$agent_parts,$lca_parts \
    bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
chroot "$root" apt-get clean

# The live root: no logins; first boot (systemd applies Ignition's presets); no SELinux.
for unit in serial-getty@ttyS0.service getty@tty1.service systemd-firstboot.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
echo uninitialized >"$root/etc/machine-id"
echo live >"$root/etc/hostname"
# No DNS in the lab (the build machine's resolv.conf must not leak in); localhost resolves from /etc/hosts.
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
: >"$root/etc/resolv.conf"
mkdir -p "$root/etc/selinux"
printf 'SELINUX=disabled\nSELINUXTYPE=default\n' >"$root/etc/selinux/config"
install -m 0644 "$here/live/lab-live.service" "$root/etc/systemd/system/lab-live.service"
ln -sf /etc/systemd/system/lab-live.service "$root/etc/systemd/system/multi-user.target.wants/lab-live.service"

# The lab's stand-ins on the live root (tests/lab/live-root/): coreos-installer (no osmet image here),
# nmstatectl (no NIC), chcon (no SELinux); the lab's registry (config, insecure on the loopback, the
# seed disk mounted at /srv/ibi-lab) and the install unit's drop-in (ibi's, or the lca-cli script's)
# that orders it after the registry and echoes it to the serial console.
lr="$here/live-root"
install -m 0755 "$lr/coreos-installer" "$root/usr/bin/coreos-installer"
install -m 0755 "$lr/nmstatectl" "$root/usr/bin/nmstatectl"
mv "$root/usr/bin/chcon" "$root/usr/bin/chcon.coreutils"
install -m 0755 "$lr/chcon" "$root/usr/bin/chcon"
install -D -m 0644 "$lr/registry-config.yml" "$root/etc/docker/registry/config.yml"
install -D -m 0644 "$lr/registry-mount.conf" "$root/etc/systemd/system/docker-registry.service.d/50-ibi-lab.conf"
install -D -m 0644 "$lr/registries-ibi-lab.conf" "$root/etc/containers/registries.conf.d/50-ibi-lab.conf"
for unit in ibi-agent-install.service install-rhcos-and-restore-seed.service; do
    install -D -m 0644 "$lr/50-ibi-lab.conf" "$root/etc/systemd/system/$unit.d/50-ibi-lab.conf"
done
mkdir -p "$root/srv/ibi-lab"
echo 'LABEL=IBILABSEED /srv/ibi-lab ext4 ro,noload,nofail,x-systemd.device-timeout=120s 0 0' >>"$root/etc/fstab"
# As on RHCOS (99-default-disable.preset): the first boot's preset run enables only what a preset names
# (Ignition's 20-ignition.preset for the units its config enables, Debian's 90-systemd.preset); without a
# catch-all rule it would enable every unit that has an [Install] section (docker-registry, podman's).
# It logs "Failed to populate /etc with preset unit settings ... RF-kill" for the masked units above, and
# enables the rest all the same.
mkdir -p "$root/etc/systemd/system-preset"
echo 'disable *' >"$root/etc/systemd/system-preset/99-ibi-lab-default-disable.preset"
# The registry starts with ibi's unit (its drop-in wants it), not at every boot of the live ISO.
rm -f "$root/etc/systemd/system/multi-user.target.wants/docker-registry.service"
# No NIC: nothing to wait for before network-online.target, no network to configure (RHCOS's is
# NetworkManager's, not networkd's); nothing for podman's own units to do. Nor for what Debian's packages
# enable at install (the first boot's preset run only enables, it disables nothing they enabled): under
# TCG podman-auto-update.service alone kept the one vCPU busy for 47 s of every boot, lvm2-monitor 10 s,
# networkd 11 s, e2scrub_reap 7 s, before the install unit started; mdadm-shutdown.service (mdadm's: the
# live system has no md array; lca-cli only calls mdadm) ran dracut at every power-off, 83 s.
for unit in systemd-networkd-wait-online.service systemd-networkd.service systemd-networkd.socket \
    podman.service podman.socket podman-auto-update.service podman-auto-update.timer podman-restart.service \
    lvm2-monitor.service e2scrub_reap.service getty-static.service mdadm-shutdown.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done

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
# Only the drivers the lab's VM boots with (q35: the SATA CD, virtio disks; the ISO, its squashfs, the
# tmpfs overlay): the generic set (--no-hostonly alone) is 151 MB unpacked, 46 MB compressed, all read by
# the firmware and unpacked by the kernel at every boot under TCG; this one is 66 MB and 24 MB. The live
# root keeps every module, for what the installer and the agent load later (xfs, loop, ...).
vm_drivers="ahci libahci libata sr_mod cdrom sd_mod scsi_mod virtio_pci virtio_blk virtio_scsi"
vm_drivers+=" isofs squashfs overlay loop ext4 xfs vfat nls_cp437 nls_iso8859_1"
chroot "$root" dracut --quiet --no-hostonly --force --add "ignition-lab ibi-lab-live" \
    --omit "plymouth network dmsquash-live lvm mdraid dm" --drivers "$vm_drivers" /boot/initrd-live.img "$kver"
umount "$root/proc"
proc_mounted=""

stage="$work/stage"
mkdir -p "$stage/images/pxeboot" "$stage/LiveOS" "$stage/coreos" "$stage/boot/grub"
cp "$root/boot/vmlinuz-$kver" "$stage/images/pxeboot/vmlinuz"
cp "$root/boot/initrd-live.img" "$stage/images/pxeboot/initrd.img"
truncate -s 256K "$stage/images/ignition.img"
# zstd, not xz: the live system reads its binaries (podman, skopeo, the registry, systemd) from here under
# TCG; unpacking the whole root took 1.8 s of CPU from zstd against 16 s from xz (unsquashfs -p 1 on the
# build machine), for 258 MB instead of 212 MB.
mksquashfs "$root" "$stage/LiveOS/squashfs.img" -comp zstd -e boot -noappend -quiet -no-xattrs >/dev/null

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
