#!/usr/bin/env bash
# Builds a lifecycle-agent seed image with real content, for the end-to-end test of `ibi agent install`
# (issue 4 item 6; lifecycle-agent reference §1 and §4.5). Unlike make-seed.sh, whose archives are
# placeholders, every file here is what the restore really consumes:
#   ostree.tgz          a real ostree repo (archive mode) with one commit of a tiny bootable tree:
#                       usr/lib/modules/<kver>/{vmlinuz,initramfs.img}, usr/lib/os-release, usr/etc/…,
#                       usr/bin/…; the ref ostree/0/1/0 keeps it, as in a sysroot repo
#   rpm-ostree.json     that commit as the booted deployment rhcos-<checksum>.0
#   mco-currentconfig.json   a MachineConfig with three spec.kernelArguments and spec.fips false
#   ostree-<checksum>.0.origin
#   var.tgz             var/lib/kubelet/…, var/lib/etcd/member/…, var/opt/…, var/seed_data/manifest.json,
#                       var/usrlocal/bin/lca-cli; modes 0600/0700/0755 and a symlink
#   etc.tgz             etc/hostname (overrides the tree's), etc/kubernetes/…, the lca units and their
#                       enable symlinks; etc/kubernetes/kubelet-ca.crt carries the xattr user.ibi.fixture=seed
#   etc.deletions       /etc/ibi-fixture.d (a dir of the tree), /etc/motd (a file of the tree) and
#                       /etc/ibi-fixture-missing.conf (absent: lca-cli aborts on it, ibi only warns)
#   containers.list     3 images under the fake release registry $FAKE_REGISTRY (2 by tag, 1 by digest)
#   manifest.json       SeedClusterInfo, also the seed_cluster_info label byte for byte
#   lca-cli             a stub script
# as one gzip layer of an OCI image layout (amd64, both lifecycle-agent labels) tagged TAG.
#
# With PRECACHE_DIR, the three images of containers.list are written there as one OCI layout with the
# tags precache-1..3, and PRECACHE_DIR/images.tsv says per line "<tag> <repository> <reference>" where
# the list names <FAKE_REGISTRY>/<repository><reference> (reference ":tag" or "@sha256:…"): a test
# pushes `oci:PRECACHE_DIR:<tag>` to `docker://<local registry>/<repository>:<tag>` (by-digest entries
# keep their digest, skopeo copies the manifest unchanged) and sets releaseRegistry to the local one.
#
# Deterministic: fixed mtimes (also the ostree commit's, through --timestamp), owners and modes, no
# host xattrs in the commit, sorted tar members, pax headers without atime/ctime or PIDs, `gzip -n`;
# two runs with the same tools give the same digests. What is not: the bytes depend on the versions
# of gzip, zlib (inside the archive repo's objects) and tar on the build machine.
#
# Usage: make-real-seed.sh OUTDIR [TAG [PRECACHE_DIR]]     TAG: the seed's OCP version, default 4.16.0
# Needs bash, ostree, GNU tar, gzip, sha256sum. Runs as an unprivileged user or as root.
set -euo pipefail
export LC_ALL=C TZ=UTC
umask 022

[ $# -ge 1 ] && [ $# -le 3 ] || {
    echo "usage: $0 OUTDIR [TAG [PRECACHE_DIR]]" >&2
    exit 2
}
out=$1
tag=${2:-4.16.0}
precache_out=${3:-}
arch=amd64
registry=${FAKE_REGISTRY:-release.ibi-fixture.example}

# SEED_TREE_TAR: commit the tree in this tar (tests/lab/seed-tree.sh: a bootable Debian tree laid out for
# ostree, kernel and initramfs under usr/lib/modules/<kver>) instead of the tiny tree; the fixture's
# usr/etc files are added to it. LCA_CLI: this file is the seed's lca-cli instead of the stub (whose
# lca-init-monitor.service then runs `lca-cli init-monitor`, not post-pivot). Both unset: the output
# is the same as without them.
tree_tar=${SEED_TREE_TAR:-}
lca_cli_file=${LCA_CLI:-}
# LCA_CLI_ROOT: this file (lifecycle-agent's lca-cli binary, for the lab's hostAgent: lca) is the
# image root's lca-cli, the one the installation ISO's script copies out and runs as `lca-cli ibi`;
# the seed's var/usrlocal/bin/lca-cli stays the stub or LCA_CLI (the post-pivot a booted host runs).
# ETC_DELETIONS: etc.deletions holds these lines instead of the fixture's three (lca-cli removes each
# with os.Remove and stops at the first that fails: an absent path or a directory that is not empty).
lca_cli_root=${LCA_CLI_ROOT:-}
etc_deletions=${ETC_DELETIONS-}

epoch=1715644800 # 2024-05-14T00:00:00Z, the day seed format 4 appeared
mtime=2024-05-14T00:00:00Z
kver=5.14.0-427.13.1.el9_4.x86_64
osname=rhcos

for tool in ostree tar gzip sha256sum; do
    command -v "$tool" >/dev/null || {
        echo "$0: $tool is not installed" >&2
        exit 1
    }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# Pax (what `tar --xattrs --selinux --acls` writes) without the parts that vary between runs.
pax_opts=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime
tar_common=(--format=posix --owner=0 --group=0 --numeric-owner --mtime="$mtime" --no-recursion)

# det_tar DIR DEST [XATTR_MEMBER NAME=VALUE]: the whole tree of DIR, members sorted, into the tar DEST.
# The extended attribute is written as the SCHILY.xattr record GNU tar --xattrs writes, placed with
# --pax-option so the build host needs neither setfattr nor a filesystem with user xattrs. GNU tar
# drops such records unless the member has another extended record, hence the fixed atime/ctime.
det_tar() {
    local dir=$1 dest=$2 xmember=${3:-} xattr=${4:-}
    local list=$work/members part=$work/part.tar
    # DOT_MEMBERS=1: members named ./x, as `tar -C DIR .` names them (lca-cli's ostree.tgz).
    if [ "${DOT_MEMBERS:-0}" = 1 ]; then
        (cd "$dir" && find . -mindepth 1 | sort) >"$list"
    else
        (cd "$dir" && find . -mindepth 1 -printf '%P\n' | sort) >"$list"
    fi
    local before after
    if [ -z "$xmember" ]; then
        tar "${tar_common[@]}" --pax-option="$pax_opts" -C "$dir" -cf "$dest" -T "$list"
        return
    fi
    grep -qxF "$xmember" "$list" || {
        echo "$0: $xmember is not in $dir" >&2
        exit 1
    }
    before=$(grep -nxF "$xmember" "$list" | cut -d: -f1)
    after=$((before + 1))
    head -n $((before - 1)) "$list" >"$work/before"
    tail -n +"$after" "$list" >"$work/after"
    tar "${tar_common[@]}" --pax-option="$pax_opts" -C "$dir" -cf "$dest" -T "$work/before"
    tar "${tar_common[@]}" -C "$dir" -cf "$part" \
        --pax-option="exthdr.name=%d/PaxHeaders/%f,atime:=$epoch,ctime:=$epoch,SCHILY.xattr.$xattr" \
        "$xmember"
    tar -A -f "$dest" "$part"
    tar "${tar_common[@]}" --pax-option="$pax_opts" -C "$dir" -cf "$part" -T "$work/after"
    tar -A -f "$dest" "$part"
}
det_tgz() {
    det_tar "$1" "$work/tmp.tar" "${@:3}"
    gzip -n -9 -c "$work/tmp.tar" >"$2"
}

# blob DIR FILE: copies FILE into the layout DIR under its digest and prints "digest size".
blob() {
    local d
    d=$(sha "$2")
    mkdir -p "$1/blobs/sha256"
    cp "$2" "$1/blobs/sha256/$d"
    echo "$d $(size "$2")"
}

# image LAYOUT LAYER_TGZ LABELS CREATED_BY: writes the layer, an amd64 config with LABELS (the inside
# of the Labels object, JSON) and the manifest into LAYOUT; prints "manifest-digest manifest-size".
image() {
    local layout=$1 layer_tgz=$2 labels=$3 created_by=$4
    local diff_id layer layer_size config config_size manifest manifest_size
    diff_id=$(gzip -dc "$layer_tgz" | sha256sum | cut -d' ' -f1)
    read -r layer layer_size < <(blob "$layout" "$layer_tgz")
    printf '%s' '{"created":"'$mtime'","architecture":"'$arch'","os":"linux","config":{"Labels":{'"$labels"'}},"rootfs":{"type":"layers","diff_ids":["sha256:'$diff_id'"]},"history":[{"created":"'$mtime'","created_by":"'"$created_by"'"}]}' >"$work/config.json"
    read -r config config_size < <(blob "$layout" "$work/config.json")
    printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:'$config'","size":'$config_size'},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:'$layer'","size":'$layer_size'}]}' >"$work/manifest.json"
    read -r manifest manifest_size < <(blob "$layout" "$work/manifest.json")
    echo "$manifest $manifest_size"
}

# index LAYOUT "digest size tag"...: the layout's index.json naming each manifest by its tag.
index() {
    local layout=$1 entries='' d s t
    shift
    for e in "$@"; do
        read -r d s t <<<"$e"
        entries+=${entries:+,}'{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:'$d'","size":'$s',"annotations":{"org.opencontainers.image.ref.name":"'$t'"}}'
    done
    printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
    printf '%s' '{"schemaVersion":2,"manifests":['"$entries"']}' >"$layout/index.json"
}

# --- the precache images: one tiny layer each --------------------------------------------------------
repos=(openshift-release-dev/ocp-v4.0-art-dev openshift-release-dev/ocp-release edge-infrastructure/recert)
refs=(digest ":$tag-x86_64" ":v0")
pre=$work/precache
mkdir -p "$pre"
list_entries=() tsv='' pre_entries=()
for i in 1 2 3; do
    d=$work/pre$i
    mkdir -p "$d/ibi-fixture"
    printf 'precache image %s of the ibi real-seed fixture (%s)\n' "$i" "${repos[i - 1]}" >"$d/ibi-fixture/precache-$i"
    det_tgz "$d" "$work/pre$i.tgz"
    read -r m ms < <(image "$pre" "$work/pre$i.tgz" '' "COPY precache-$i / # ibi fixture")
    pre_entries+=("$m $ms precache-$i")
    ref=${refs[i - 1]}
    [ "$ref" = digest ] && ref="@sha256:$m"
    list_entries+=("$registry/${repos[i - 1]}$ref")
    tsv+="precache-$i ${repos[i - 1]} $ref"$'\n'
done
if [ -n "$precache_out" ]; then
    rm -rf "$precache_out"
    mkdir -p "$precache_out"
    cp -r "$pre/blobs" "$precache_out/"
    index "$precache_out" "${pre_entries[@]}"
    printf '%s' "$tsv" >"$precache_out/images.tsv"
fi

root=$work/root
mkdir -p "$root"

# --- SeedClusterInfo: /manifest.json, var/seed_data/manifest.json and the label ------------------------
cluster_info='{"seed_cluster_ocp_version":"'$tag'","base_domain":"seed.example.com","cluster_name":"seed","node_ips":["192.168.126.10"],"release_registry":"'$registry'","mirror_registry_configured":false,"sno_hostname":"seed-node","recert_image_pull_spec":"'${list_entries[2]}'","has_proxy":false,"has_fips":false,"additionalTrustBundle":{"hasUserCaBundle":false,"proxyConfigmapName":""},"container_storage_mountpoint_target":"/dev/disk/by-partlabel/var-lib-containers","ingress_certificate_cn":"ingress-operator@'$epoch'","machine_networks":["192.168.126.0/24"]}'
printf '%s' "$cluster_info" >"$root/manifest.json"

lca_cli='#!/bin/sh
# lca-cli stub from the ibi real-seed fixture: a real seed carries the lifecycle-agent binary here.
echo "lca-cli (ibi fixture stub) $*" >&2
exit 1
'
[ -z "$lca_cli_file" ] || lca_cli=$(cat "$lca_cli_file")
if [ -n "$lca_cli_root" ]; then
    cp "$lca_cli_root" "$root/lca-cli"
else
    printf '%s' "$lca_cli" >"$root/lca-cli"
fi

# lca-cli joins the list with "\n" and writes no trailing newline.
(
    IFS=$'\n'
    printf '%s' "${list_entries[*]}"
) >"$root/containers.list"

# --- ostree.tgz: an archive repo with one commit; members start with ./ ---------------------------------
tree=$work/tree
mkdir -p "$tree"
if [ -n "$tree_tar" ]; then
    tar --numeric-owner -xf "$tree_tar" -C "$tree"
else
    mkdir -p "$tree/usr/lib/modules/$kver" "$tree/usr/bin"
    printf 'ibi fixture kernel %s\n' "$kver" >"$tree/usr/lib/modules/$kver/vmlinuz"
    printf 'ibi fixture initramfs %s\n' "$kver" >"$tree/usr/lib/modules/$kver/initramfs.img"
    printf '%s\n' 'NAME="Red Hat Enterprise Linux CoreOS"' 'ID="rhcos"' 'ID_LIKE="rhel fedora"' \
        'VERSION="416.94.202405140000-0"' 'OSTREE_VERSION="416.94.202405140000-0"' \
        'PRETTY_NAME="Red Hat Enterprise Linux CoreOS 416.94.202405140000-0 (ibi seed fixture)"' \
        >"$tree/usr/lib/os-release"
    printf '#!/bin/sh\nexit 0\n' >"$tree/usr/bin/sh"
    chmod 0755 "$tree/usr/bin/sh"
fi
mkdir -p "$tree/usr/bin" "$tree/usr/etc/ibi-fixture.d"
printf 'rhcos-seed-tree\n' >"$tree/usr/etc/hostname"
printf 'Welcome to the ibi seed fixture.\n' >"$tree/usr/etc/motd"
printf 'from the seed commit\n' >"$tree/usr/etc/ibi-fixture.d/seed.conf"
printf '#!/bin/sh\necho "hello from the ibi seed fixture"\n' >"$tree/usr/bin/ibi-fixture-hello"
chmod 0755 "$tree/usr/bin/ibi-fixture-hello"

repo=$work/ostree
ostree init --mode=archive --repo="$repo"
checksum=$(ostree commit --repo="$repo" --branch=ostree/0/1/0 --tree=dir="$tree" --timestamp="$mtime" \
    --owner-uid=0 --owner-gid=0 --no-xattrs --subject="ibi seed fixture" \
    --add-metadata-string=version=416.94.202405140000-0)
DOT_MEMBERS=1 det_tgz "$repo" "$root/ostree.tgz"

deployment=$checksum.0
cat >"$root/rpm-ostree.json" <<JSON
{"deployments":[{"id":"$osname-$deployment","osname":"$osname","serial":0,"checksum":"$checksum","version":"416.94.202405140000-0","timestamp":$epoch,"origin":"ostree-unverified-registry:${list_entries[0]}","container-image-reference":"ostree-unverified-registry:${list_entries[0]}","booted":true,"staged":false,"pinned":false,"unlocked":"none","requested-packages":[],"requested-local-packages":[],"requested-base-removals":[],"requested-base-local-replacements":[],"regenerate-initramfs":false}],"transaction":null,"cached-update":null,"update-driver":null}
JSON
cat >"$root/mco-currentconfig.json" <<JSON
{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{"name":"rendered-master-ibi-fixture"},"spec":{"config":{"ignition":{"version":"3.4.0"}},"extensions":[],"fips":false,"kernelArguments":["systemd.unified_cgroup_hierarchy=1","cgroup_no_v1=all","psi=0"],"kernelType":"default","osImageURL":"${list_entries[0]}"}}
JSON
printf '[origin]\ncontainer-image-reference=ostree-unverified-registry:%s\n' "${list_entries[0]}" \
    >"$root/ostree-$deployment.origin"

# --- var.tgz: members start with var/ -------------------------------------------------------------------
v=$work/var
mkdir -p "$v/var/lib/kubelet/pki" "$v/var/lib/etcd/member/snap" "$v/var/lib/etcd/member/wal" \
    "$v/var/opt/ibi-fixture" "$v/var/seed_data" "$v/var/usrlocal/bin"
# A bootable tree's journal persists (journald's Storage=auto), for the test to read after power-off.
[ -z "$tree_tar" ] || mkdir -p "$v/var/log/journal"
printf '%s' "$cluster_info" >"$v/var/seed_data/manifest.json"
printf '%s' "$lca_cli" >"$v/var/usrlocal/bin/lca-cli"
printf '%s\n' 'apiVersion: kubelet.config.k8s.io/v1beta1' 'kind: KubeletConfiguration' >"$v/var/lib/kubelet/config.yaml"
printf '{"auths":{}}\n' >"$v/var/lib/kubelet/config.json"
printf 'fixture client certificate\n' >"$v/var/lib/kubelet/pki/kubelet-client-2024-05-14-00-00-00.pem"
ln -s /var/lib/kubelet/pki/kubelet-client-2024-05-14-00-00-00.pem "$v/var/lib/kubelet/pki/kubelet-client-current.pem"
printf 'fixture etcd snapshot\n' >"$v/var/lib/etcd/member/snap/db"
printf 'fixture etcd wal\n' >"$v/var/lib/etcd/member/wal/0000000000000000-0000000000000000.wal"
printf '#!/bin/sh\necho "from the seed var"\n' >"$v/var/opt/ibi-fixture/hello.sh"
chmod 0700 "$v/var/lib/etcd" "$v/var/lib/etcd/member" "$v/var/lib/etcd/member/snap" "$v/var/lib/etcd/member/wal"
chmod 0600 "$v/var/lib/kubelet/config.json" "$v/var/lib/kubelet/pki/kubelet-client-2024-05-14-00-00-00.pem" \
    "$v/var/lib/etcd/member/snap/db" "$v/var/lib/etcd/member/wal/"*.wal
chmod 0755 "$v/var/usrlocal/bin/lca-cli" "$v/var/opt/ibi-fixture/hello.sh"
det_tgz "$v" "$root/var.tgz"

# --- etc.tgz: the modified and added /etc files (ostree admin config-diff) ---------------------------------
e=$work/etc
mkdir -p "$e/etc/systemd/system/multi-user.target.wants" "$e/etc/kubernetes/static-pod-resources"
printf 'seed-node\n' >"$e/etc/hostname"
for unit in installation-configuration lca-init-monitor; do
    verb=post-pivot
    [ "$unit" = lca-init-monitor ] && [ -n "$lca_cli_file" ] && verb=init-monitor
    printf '[Unit]\nDescription=%s (ibi fixture stub)\n\n[Service]\nType=oneshot\nExecStart=/usr/local/bin/lca-cli %s\n\n[Install]\nWantedBy=multi-user.target\n' \
        "$unit" "$verb" >"$e/etc/systemd/system/$unit.service"
    ln -s "/etc/systemd/system/$unit.service" "$e/etc/systemd/system/multi-user.target.wants/$unit.service"
done
printf 'fixture kubelet CA\n' >"$e/etc/kubernetes/kubelet-ca.crt"
printf 'summary: ibi fixture\n' >"$e/etc/kubernetes/recert-seed-creation-summary.yaml"
printf 'fixture static pod resource\n' >"$e/etc/kubernetes/static-pod-resources/ibi-fixture.yaml"
chmod 0600 "$e/etc/kubernetes/static-pod-resources/ibi-fixture.yaml"
det_tgz "$e" "$root/etc.tgz" etc/kubernetes/kubelet-ca.crt user.ibi.fixture:=seed

if [ -n "${ETC_DELETIONS+set}" ]; then
    printf '%s' "$etc_deletions" >"$root/etc.deletions"
else
    printf '%s\n' /etc/ibi-fixture.d /etc/motd /etc/ibi-fixture-missing.conf >"$root/etc.deletions"
fi

# --- the seed layer, config, manifest and index ------------------------------------------------------------
chmod 0644 "$root"/*.json "$root"/*.tgz "$root"/containers.list "$root"/etc.deletions "$root"/*.origin
chmod 0777 "$root/lca-cli"
det_tgz "$root" "$work/layer.tgz"
label=$(printf '%s' "$cluster_info" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')
labels='"com.openshift.lifecycle-agent.seed_cluster_info":"'$label'","com.openshift.lifecycle-agent.seed_format_version":"4"'
rm -rf "$out"
mkdir -p "$out"
read -r manifest manifest_size < <(image "$out" "$work/layer.tgz" "$labels" "COPY . / # ibi real-seed fixture")
index "$out" "$manifest $manifest_size $tag"
echo "real seed: $out (tag $tag, sha256:$manifest, ostree commit $checksum)"
