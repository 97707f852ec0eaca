#!/usr/bin/env bash
# Builds N small container images for the precache half of the restore benchmark (issue 10 item 4,
# benches/agent-restore.sh) as one OCI image layout with the tags precache-001 … precache-N.
#
# Each image has two gzip layers, like the release images a seed precaches (a shared base, then the
# image's own files): a base layer all N share (BASE_KIB of text, default 1024) and a layer of its
# own (OWN_KIB, default 64, different text per image), an amd64 config and an OCI manifest. Sharing
# the base matters: parallel pulls into one containers-storage then meet on the same layer, as the
# real precache does on RHEL base layers. Content is generated numbered text, so the
# images are small (about 1 KiB to 4 KiB per own layer, 64 KiB for the base) and the run measures
# the per-image cost of a pull (process start, registry round trips, storage locking, layer commit)
# rather than bandwidth.
#
# Deterministic: fixed mtimes and owners, sorted members, `gzip -n`: two runs give the same digests.
#
# Usage: make-precache-images.sh OUTDIR [N]      N default 50 (at least 1, at most 999)
# Needs bash, GNU tar, gzip, sha256sum; any user.
set -euo pipefail
export LC_ALL=C TZ=UTC
umask 022

[ $# -ge 1 ] && [ $# -le 2 ] || {
    echo "usage: $0 OUTDIR [N]" >&2
    exit 2
}
out=$1
n=${2:-50}
base_kib=${BASE_KIB:-1024}
own_kib=${OWN_KIB:-64}
[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 999 ] || {
    echo "$0: N must be an integer in 1..999, got $n" >&2
    exit 2
}
mtime=2024-05-14T00:00:00Z

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

sha() { sha256sum "$1" | cut -d' ' -f1; }
# text BYTES SALT: BYTES of numbered lines that differ with SALT.
text() {
    awk -v n="$1" -v salt="$2" 'BEGIN {
        for (i = 1; n > 0; i++) {
            l = "line " i " of " salt ", an ibi precache fixture\n"
            if (length(l) > n) l = substr(l, 1, n)
            printf "%s", l
            n -= length(l)
        } }'
}
# layer DIR TGZ: the tree of DIR as a deterministic gzip'd tar; prints "digest size diff_id".
layer() {
    (cd "$1" && find . -mindepth 1 -printf '%P\n' | sort) >"$work/members"
    tar --format=posix --owner=0 --group=0 --numeric-owner --mtime="$mtime" --no-recursion \
        --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
        -C "$1" -cf "$work/layer.tar" -T "$work/members"
    gzip -n -6 -c "$work/layer.tar" >"$2"
    echo "$(sha "$2") $(stat -c %s "$2") $(sha "$work/layer.tar")"
}
# blob FILE: moves FILE into the layout under its digest.
blob() { mv "$1" "$out/blobs/sha256/$(sha "$1")"; }

rm -rf "$out"
mkdir -p "$out/blobs/sha256" "$work/base/usr/share/ibi-base"
text $((base_kib << 10)) base >"$work/base/usr/share/ibi-base/data.txt"
read -r base base_size base_diff < <(layer "$work/base" "$work/base.tgz")
blob "$work/base.tgz"

entries=''
for i in $(seq 1 "$n"); do
    tag=precache-$(printf %03d "$i")
    own=$work/own$i
    mkdir -p "$own/opt/$tag"
    text $((own_kib << 10)) "$tag" >"$own/opt/$tag/data.txt"
    read -r l l_size l_diff < <(layer "$own" "$work/own.tgz")
    blob "$work/own.tgz"
    rm -rf "$own"
    printf '%s' '{"created":"'$mtime'","architecture":"amd64","os":"linux","config":{"Cmd":["/bin/true"]},"rootfs":{"type":"layers","diff_ids":["sha256:'$base_diff'","sha256:'$l_diff'"]},"history":[{"created":"'$mtime'","created_by":"ibi precache fixture base"},{"created":"'$mtime'","created_by":"ibi precache fixture '$tag'"}]}' >"$work/config.json"
    c=$(sha "$work/config.json")
    c_size=$(stat -c %s "$work/config.json")
    blob "$work/config.json"
    printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:'$c'","size":'$c_size'},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:'$base'","size":'$base_size'},{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:'$l'","size":'$l_size'}]}' >"$work/manifest.json"
    m=$(sha "$work/manifest.json")
    m_size=$(stat -c %s "$work/manifest.json")
    blob "$work/manifest.json"
    entries+=${entries:+,}'{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:'$m'","size":'$m_size',"annotations":{"org.opencontainers.image.ref.name":"'$tag'"}}'
done
printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
printf '%s' '{"schemaVersion":2,"manifests":['"$entries"']}' >"$out/index.json"
echo "precache images: $out ($n images, tags precache-001..precache-$(printf %03d "$n"), base layer $base_size bytes)"
