#!/usr/bin/env bash
# Regenerates seed-fixtures/seed/: a tiny synthetic lifecycle-agent seed image in OCI image layout.
#
# Structurally a real seed (lifecycle-agent `lca-cli create`, see docs and the lifecycle-agent reference §1):
# one tar+gzip layer holding, at the image root, the lca-cli stub, manifest.json (SeedClusterInfo),
# containers.list, var.tgz, etc.tgz, etc.deletions, ostree.tgz, rpm-ostree.json, mco-currentconfig.json and
# the ostree origin file; an OCI config with the two lifecycle-agent labels. Every byte comes from the text
# below: fixed mtimes, owners and modes, sorted tar members, `gzip -n`, so two runs give the same digests.
#
# Usage: make-seed.sh [OUT_DIR]        (default: the seed/ directory beside this script)
# The tests make variants through these environment variables:
#   SEED_FORMAT_VERSION (4)  SEED_OCP_VERSION (4.16.0)  SEED_ARCH (amd64)
#   SEED_MOUNT_TARGET (/dev/disk/by-partlabel/var-lib-containers)  SEED_TAG (= SEED_OCP_VERSION)
#   SEED_CONTAINERS_LIST (the containers.list text; default: two release images and recert)
#   SEED_INDEX (0; 1 wraps the manifest in an image index with its platform)
#   SEED_CREATED (2024-05-14T00:00:00Z; the config's `created`, which podman sets when lca-cli create
#                 builds a real seed: ibi dates the seed's lifecycle-agent build by it)
#   SEED_CA_TRUST_AFTER (0; 1 orders installation-configuration.service
#                        After=coreos-update-ca-trust.service, as lifecycle-agent 95c0672d1 and its
#                        4.20-4.22 cherry-picks do)
# Seeds of 4.21 and 5.0 as the tests use them: SEED_OCP_VERSION=4.21.0, SEED_OCP_VERSION=5.0.0
# (with SEED_CREATED and SEED_CA_TRUST_AFTER for a seed generated before or after the fixes).
# and, for the seed_cluster_info label (the same JSON as /manifest.json and var/seed_data/manifest.json):
#   SEED_INFO_SHAPE (4.20: node_ips and machine_networks lists, as lifecycle-agent 4.20+ writes them;
#                    4.16: one node_ip string and no machine_networks, as 4.16-4.19 write them)
#   SEED_NODE_IPS (192.168.126.10; comma-separated, one only with shape 4.16)
#   SEED_MACHINE_NETWORKS (192.168.126.0/24; comma-separated; empty omits the key; shape 4.20 only)
#   SEED_HAS_PROXY (false)  SEED_HAS_FIPS (false; also the MachineConfig's spec.fips)
# The defaults give the checked-in seed/ byte for byte.
set -euo pipefail
export LC_ALL=C TZ=UTC
umask 022

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/seed}
format_version=${SEED_FORMAT_VERSION:-4}
ocp_version=${SEED_OCP_VERSION:-4.16.0}
arch=${SEED_ARCH:-amd64}
mount_target=${SEED_MOUNT_TARGET-/dev/disk/by-partlabel/var-lib-containers}
tag=${SEED_TAG:-$ocp_version}
with_index=${SEED_INDEX:-0}
info_shape=${SEED_INFO_SHAPE:-4.20}
node_ips=${SEED_NODE_IPS:-192.168.126.10}
machine_networks=${SEED_MACHINE_NETWORKS-192.168.126.0/24}
has_proxy=${SEED_HAS_PROXY:-false}
has_fips=${SEED_HAS_FIPS:-false}
created=${SEED_CREATED:-2024-05-14T00:00:00Z}
ca_trust_after=${SEED_CA_TRUST_AFTER:-0}

die() {
    echo "$0: $*" >&2
    exit 2
}
case $ca_trust_after in 0 | 1) ;; *) die "SEED_CA_TRUST_AFTER is 0 or 1, not '$ca_trust_after'" ;; esac
case $created in [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T*Z) ;; *) die "SEED_CREATED is RFC 3339 UTC, not '$created'" ;; esac
for flag in "$has_proxy" "$has_fips"; do
    case $flag in true | false) ;; *) die "SEED_HAS_PROXY and SEED_HAS_FIPS are true or false, not '$flag'" ;; esac
done
# json_list "a,b": ["a","b"] (the values are addresses and CIDRs: nothing to escape).
json_list() {
    local out='' v
    local IFS=,
    for v in $1; do
        out+=${out:+,}'"'$v'"'
    done
    printf '[%s]' "$out"
}
case $info_shape in
4.20)
    node_key='"node_ips":'$(json_list "$node_ips")
    networks_key=${machine_networks:+',"machine_networks":'$(json_list "$machine_networks")}
    ;;
4.16)
    case $node_ips in *,*) die "a 4.16-4.19 seed has one node_ip, not '$node_ips'" ;; esac
    [ "${SEED_MACHINE_NETWORKS-}" = "" ] || die "a 4.16-4.19 seed has no machine_networks"
    node_key='"node_ip":"'$node_ips'"'
    networks_key=''
    ;;
*) die "SEED_INFO_SHAPE is 4.20 or 4.16, not '$info_shape'" ;;
esac

mtime=2024-05-14T00:00:00Z
checksum=3f2a9c0d1e4b5a6978812c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071
osname=rhcos

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Deterministic tar of the named members of directory $1 into $2 (members are sorted by tar).
det_tar() {
    local dir=$1 dest=$2
    shift 2
    find "$dir" -exec touch -h -d "$mtime" {} +
    tar --sort=name --format=ustar --owner=0 --group=0 --numeric-owner --mtime="$mtime" \
        -C "$dir" -cf "$dest" "$@"
}
det_tgz() {
    local dest=$2
    det_tar "$1" "$work/tmp.tar" "${@:3}"
    gzip -n -9 -c "$work/tmp.tar" >"$dest"
}
sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

root=$work/root
mkdir -p "$root"

# --- SeedClusterInfo, the same compact JSON in /manifest.json, var/seed_data and the label -------------
# Keys in SeedClusterInfo's declaration order, omitempty as Go's encoding/json applies it.
cluster_info='{"seed_cluster_ocp_version":"'$ocp_version'","base_domain":"seed.example.com","cluster_name":"seed",'$node_key',"release_registry":"quay.io","sno_hostname":"seed-node","recert_image_pull_spec":"quay.io/edge-infrastructure/recert:v0","has_proxy":'$has_proxy',"has_fips":'$has_fips',"additionalTrustBundle":{"hasUserCaBundle":false,"proxyConfigmapName":""}'
if [ -n "$mount_target" ]; then
    cluster_info+=',"container_storage_mountpoint_target":"'$mount_target'"'
fi
cluster_info+=',"ingress_certificate_cn":"ingress-operator@1715644800"'$networks_key'}'
printf '%s' "$cluster_info" >"$root/manifest.json"

lca_cli='#!/bin/sh
# lca-cli stub from the ibi seed fixture: a real seed carries the lifecycle-agent binary here.
echo "lca-cli (ibi fixture stub) $*" >&2
exit 1
'
printf '%s' "$lca_cli" >"$root/lca-cli"
chmod 0777 "$root/lca-cli"

default_list='quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:1111111111111111111111111111111111111111111111111111111111111111
quay.io/openshift-release-dev/ocp-release@sha256:2222222222222222222222222222222222222222222222222222222222222222
quay.io/edge-infrastructure/recert:v0'
printf '%s' "${SEED_CONTAINERS_LIST:-$default_list}" >"$root/containers.list"

# --- var.tgz: members start with var/ -------------------------------------------------------------------
v=$work/var
mkdir -p "$v/var/seed_data" "$v/var/usrlocal/bin" "$v/var/lib/kubelet"
printf '%s' "$cluster_info" >"$v/var/seed_data/manifest.json"
printf '%s' "$lca_cli" >"$v/var/usrlocal/bin/lca-cli"
chmod 0755 "$v/var/usrlocal/bin/lca-cli"
printf '%s\n' 'apiVersion: kubelet.config.k8s.io/v1beta1' 'kind: KubeletConfiguration' >"$v/var/lib/kubelet/config.yaml"
det_tgz "$v" "$root/var.tgz" var

# --- etc.tgz: modified and added /etc files only (ostree admin config-diff) --------------------------------
e=$work/etc
mkdir -p "$e/etc/systemd/system/multi-user.target.wants" "$e/etc/mco" "$e/etc/kubernetes"
for unit in installation-configuration lca-init-monitor; do
    after=''
    if [ "$unit" = installation-configuration ] && [ "$ca_trust_after" = 1 ]; then
        after='After=coreos-update-ca-trust.service\n'
    fi
    printf '[Unit]\nDescription=%s (ibi fixture stub)\n'"$after"'\n[Service]\nType=oneshot\nExecStart=/usr/local/bin/lca-cli post-pivot\n\n[Install]\nWantedBy=multi-user.target\n' \
        "$unit" >"$e/etc/systemd/system/$unit.service"
    ln -s "/etc/systemd/system/$unit.service" "$e/etc/systemd/system/multi-user.target.wants/$unit.service"
done
printf '' >"$e/etc/mco/proxy.env"
printf 'summary: ibi fixture stub\n' >"$e/etc/kubernetes/recert-seed-creation-summary.yaml"
det_tgz "$e" "$root/etc.tgz" etc

printf '%s\n' /etc/localtime /etc/motd >"$root/etc.deletions"

# --- ostree.tgz: a copy of /ostree/repo, members start with ./ ------------------------------------------
o=$work/ostree
mkdir -p "$o/objects/3f" "$o/refs/heads" "$o/tmp"
printf '[core]\nrepo_version=1\nmode=bare\n' >"$o/config"
printf '%s\n' "$checksum" >"$o/refs/heads/ostree-0-1"
det_tgz "$o" "$root/ostree.tgz" .

cat >"$root/rpm-ostree.json" <<JSON
{"deployments":[{"id":"$osname-$checksum.0","osname":"$osname","serial":0,"checksum":"$checksum","version":"416.94.202405140000-0","booted":true,"staged":false,"pinned":false}],"transaction":null,"cached-update":null}
JSON
cat >"$root/mco-currentconfig.json" <<JSON
{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{"name":"rendered-master-fixture"},"spec":{"config":{"ignition":{"version":"3.2.0"}},"fips":$has_fips,"kernelArguments":["ibi-fixture=1"],"osImageURL":""}}
JSON
printf '[origin]\ncontainer-image=ostree-unverified-registry:quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:%s\n' \
    3333333333333333333333333333333333333333333333333333333333333333 >"$root/ostree-$checksum.0.origin"

# --- the layer, config, manifest and index ---------------------------------------------------------------
chmod 0644 "$root"/*.json "$root"/*.tgz "$root"/containers.list "$root"/etc.deletions "$root"/*.origin
rm -rf "$out"
mkdir -p "$out/blobs/sha256"
det_tar "$root" "$work/layer.tar" $(cd "$root" && ls)
gzip -n -9 -c "$work/layer.tar" >"$work/layer.tar.gz"
diff_id=$(sha "$work/layer.tar")
layer=$(sha "$work/layer.tar.gz")
cp "$work/layer.tar.gz" "$out/blobs/sha256/$layer"

# blob FILE: moves FILE into the layout under its digest and prints "digest size".
blob() {
    local d
    d=$(sha "$1")
    cp "$1" "$out/blobs/sha256/$d"
    echo "$d $(size "$1")"
}

label=$(printf '%s' "$cluster_info" | sed 's/"/\\"/g')
printf '%s' '{"created":"'$created'","architecture":"'$arch'","os":"linux","config":{"Labels":{"com.openshift.lifecycle-agent.seed_cluster_info":"'"$label"'","com.openshift.lifecycle-agent.seed_format_version":"'$format_version'"}},"rootfs":{"type":"layers","diff_ids":["sha256:'$diff_id'"]},"history":[{"created":"'$mtime'","created_by":"COPY . / # ibi seed fixture"}]}' >"$work/config.json"
read -r config config_size < <(blob "$work/config.json")

printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:'$config'","size":'$config_size'},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:'$layer'","size":'$(size "$work/layer.tar.gz")'}]}' >"$work/manifest.json"
read -r manifest manifest_size < <(blob "$work/manifest.json")
top_type=application/vnd.oci.image.manifest.v1+json
top=$manifest top_size=$manifest_size

if [ "$with_index" = 1 ]; then
    printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:'$manifest'","size":'$manifest_size',"platform":{"architecture":"'$arch'","os":"linux"}}]}' >"$work/index-blob.json"
    read -r top top_size < <(blob "$work/index-blob.json")
    top_type=application/vnd.oci.image.index.v1+json
fi

printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
printf '%s' '{"schemaVersion":2,"manifests":[{"mediaType":"'$top_type'","digest":"sha256:'$top'","size":'$top_size',"annotations":{"org.opencontainers.image.ref.name":"'$tag'"}}]}' >"$out/index.json"
echo "seed fixture: $out (tag $tag, sha256:$top, layer $(size "$work/layer.tar.gz") bytes)"
