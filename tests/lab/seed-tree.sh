#!/usr/bin/env bash
# The lab's bootable seed tree (tests/common/lab.rs): a Debian 12 root laid out as an ostree commit, standing in
# for the RHCOS tree of a seed, so that the disk the factory phase writes boots into the seed's deployment:
#   usr/lib/modules/<kver>/vmlinuz          Debian's kernel, where `ostree admin deploy` takes it from
#   usr/lib/modules/<kver>/initramfs.img    a dracut initramfs with Debian's ostree module (package ostree-boot:
#                                           ostree-prepare-root pivots into the deployment named by `ostree=`)
#   usr/etc/                                Debian's /etc (ostree merges it into the deployment's /etc)
#   /opt, /usr/local, /home, /srv, /mnt     links into /var (var/opt, var/usrlocal, ...) as on RHCOS, so the
#                                           seed's var.tgz, ibi's binary and the configuration land where the
#                                           host's units look for them
#   /sysroot, /ostree -> sysroot/ostree     the mount point ostree-prepare-root needs
# systemd, udev, libssl3 and libostree-1-1 (what ibi built with `agent` links), util-linux; kernel modules trimmed
# to what a q35 VM with virtio disks and a SATA CD needs (and xfs, ext4, iso9660), documentation and apt/dpkg
# state dropped: the seed stays small enough for the VM to restore under TCG in about a minute.
# No logins, no first-boot questions, a persistent journal (the seed's var.tgz makes var/log/journal).
#
# Output: a tar of that tree (GNU tar, numeric owners), which make-real-seed.sh commits with SEED_TREE_TAR.
# Usage: tests/lab/seed-tree.sh OUT.tar        (as root; built from Debian packages only; about 3 minutes)
set -euo pipefail
out=$1
work=$(mktemp -d "$(dirname "$out")/seed-tree-build.XXXXXX")
root="$work/root"
proc_mounted=""
cleanup() {
    [ -n "$proc_mounted" ] && umount "$proc_mounted" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,udev,kmod,linux-image-amd64,dracut-core,ostree-boot,libssl3,libostree-1-1,util-linux,coreutils \
    bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
chroot "$root" apt-get clean

kver=$(basename "$(ls -d "$root"/usr/lib/modules/* | head -1)")
mods="$root/usr/lib/modules/$kver/kernel"
# Only what the VM's hardware and filesystems need.
keep_drivers="block virtio scsi ata cdrom char"
keep_fs="xfs ext4 jbd2 mbcache.ko isofs overlayfs fat vfat nls autofs"
for d in "$mods"/drivers/*; do
    case " $keep_drivers " in *" $(basename "$d") "*) ;; *) rm -rf "$d" ;; esac
done
for d in "$mods"/fs/*; do
    case " $keep_fs " in *" $(basename "$d") "*) ;; *) rm -rf "$d" ;; esac
done
rm -rf "$mods"/net "$mods"/sound "$mods"/drivers/char/{tpm,ipmi,hw_random} "$mods"/arch/x86/kvm "$mods"/lib/test_*
find "$mods/drivers/scsi" -mindepth 1 -type d -prune -exec rm -rf {} +
# Nor what only package management and other locales use: the hardware database (udev works without it),
# perl (dpkg's), iconv's modules.
rm -rf "$root"/usr/lib/udev/hwdb.d "$root"/usr/lib/udev/hwdb.bin "$root"/usr/bin/perl* \
    "$root"/usr/lib/x86_64-linux-gnu/perl-base "$root"/usr/lib/x86_64-linux-gnu/gconv
chroot "$root" depmod "$kver"

# No logins, no first-boot questions.
for unit in serial-getty@ttyS0.service getty@tty1.service systemd-firstboot.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
echo lab-seed >"$root/etc/hostname"
: >"$root/etc/machine-id"
: >"$root/etc/fstab"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
: >"$root/etc/resolv.conf"

mount -t proc proc "$root/proc"
proc_mounted="$root/proc"
chroot "$root" dracut --quiet --no-hostonly --force --add "ostree systemd" \
    --omit "plymouth network dmsquash-live" "/usr/lib/modules/$kver/initramfs.img" "$kver"
umount "$root/proc"
proc_mounted=""
cp "$root/boot/vmlinuz-$kver" "$root/usr/lib/modules/$kver/vmlinuz"

# The ostree layout.
rm -rf "$root"/boot/* "$root"/var/* "$root"/usr/share/{doc,man,info,locale,lintian} "$root"/usr/share/i18n \
    "$root"/proc/* "$root"/sys/* "$root"/dev/* "$root"/run/* "$root"/tmp/*
mv "$root/etc" "$root/usr/etc"
for d in opt home srv mnt; do
    rm -rf "${root:?}/$d"
    ln -s "var/$d" "$root/$d"
done
rm -rf "$root/usr/local"
ln -s ../var/usrlocal "$root/usr/local"
rm -rf "$root/media"
ln -s run/media "$root/media"
mkdir -p "$root/sysroot"
ln -s sysroot/ostree "$root/ostree"

tar --numeric-owner --xattrs-exclude='*' -C "$root" -cf "$work/tree.tar" .
mv "$work/tree.tar" "$out"
