#!/bin/bash
# ibi lab: the CoreOS live ISO's steps Debian's ignition module does not ship: the embedded config
# as the user config, and the live root (the ISO's squashfs under a tmpfs overlay) at /sysroot.
check() { return 0; }
depends() { echo ignition-lab; }
installkernel() { instmods squashfs overlay loop isofs sr_mod ahci virtio_blk virtio_pci; }
install() {
    for u in ibi-lab-setup-user.service ibi-lab-live-root.service; do
        inst_simple "$moddir/$u" "$systemdsystemunitdir/$u"
    done
    mkdir -p "$initdir/$systemdsystemunitdir/ignition-complete.target.requires" "$initdir/$systemdsystemunitdir/initrd-root-fs.target.requires"
    ln_r "$systemdsystemunitdir/ibi-lab-setup-user.service" "$systemdsystemunitdir/ignition-complete.target.requires/ibi-lab-setup-user.service"
    ln_r "$systemdsystemunitdir/ibi-lab-live-root.service" "$systemdsystemunitdir/initrd-root-fs.target.requires/ibi-lab-live-root.service"
    # Over the real one, which 30ignition installs when the live root has policycoreutils (lca-cli's
    # restorecon): with no policy it fails, and with it Ignition's files stage.
    mkdir -p "$initdir/usr/sbin"
    cp -f "$moddir/setfiles" "$initdir/usr/sbin/setfiles" && chmod 0755 "$initdir/usr/sbin/setfiles"
    inst_hook cmdline 29 "$moddir/parse-live.sh"
    inst_script "$moddir/is-live-image" /usr/bin/is-live-image
    inst_script "$moddir/live-root.sh" /usr/sbin/ibi-lab-live-root
    mkdir -p "$initdir/$systemdsystemunitdir/ignition-files.service.d"
    inst_simple "$moddir/after-sysroot.conf" "$systemdsystemunitdir/ignition-files.service.d/10-after-sysroot.conf"
    inst_multiple cp mkdir mount
}
