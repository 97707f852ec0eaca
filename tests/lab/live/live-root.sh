#!/bin/sh
set -e
mkdir -p /run/lab/iso /run/lab/squash /run/lab/rw
mount -t iso9660 -o ro /dev/disk/by-label/IBILAB /run/lab/iso
mount -t squashfs -o ro,loop /run/lab/iso/LiveOS/squashfs.img /run/lab/squash
mount -t tmpfs -o mode=0755 tmpfs /run/lab/rw
mkdir -p /run/lab/rw/upper /run/lab/rw/work
mount -t overlay -o lowerdir=/run/lab/squash,upperdir=/run/lab/rw/upper,workdir=/run/lab/rw/work overlay /sysroot
# Container storage on a tmpfs of its own (podman's overlay driver cannot stack on the root's overlay).
mkdir -p /sysroot/var/lib/containers
mount -t tmpfs -o mode=0700 tmpfs /sysroot/var/lib/containers
