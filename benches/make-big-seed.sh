#!/usr/bin/env bash
# Builds a big seed image (at least MIB MiB of payload) for the restore benchmark (issue 4 item 8,
# benches/agent-restore.sh): seed-fixtures/make-real-seed.sh's seed, enlarged. It runs that script
# into a temp dir, unpacks its one layer, and
#   ostree.tgz   gets a new commit on ostree/0/1/0: the seed tree plus usr/lib/ibi-bulk/… (~60% of
#                MIB) committed with `--tree=ref=<old> --tree=dir=<bulk>`, same timestamp and metadata,
#                no parent; the old commit is pruned, rpm-ostree.json and the origin file's name follow
#                the new checksum
#   var.tgz      gets var/lib/etcd/member/snap/db as one big file (~10% of MIB) and
#                var/lib/kubelet/ibi-bulk/… (~30%)
# Every other root file (manifest.json, etc.tgz, etc.deletions, containers.list, labels) is kept, so
# the result restores like the small seed and passes the seed_cluster_ocp_version check.
# Bulk content is incompressible (an AES-CTR keystream with a fixed key, so the same on every run) in
# files of mixed sizes: half the bytes in 1–8 MiB files, 30% in 64 KiB–1 MiB, 20% in 1–64 KiB (a few
# thousand files for 512 MiB), 100 to a directory. Archives are written as make-real-seed.sh writes
# them (sorted members, fixed mtimes/owners, pax without atime/ctime, `gzip -n`), so two runs with the
# same tools give the same digests.
#
# Usage: make-big-seed.sh OUTDIR [MIB [TAG]]     MIB default 512 (minimum 16), TAG default 4.16.0
# Needs bash, ostree, GNU tar, gzip, sha256sum, openssl; about 3×MIB of free space in TMPDIR.
set -euo pipefail
export LC_ALL=C TZ=UTC
umask 022

[ $# -ge 1 ] && [ $# -le 3 ] || {
    echo "usage: $0 OUTDIR [MIB [TAG]]" >&2
    exit 2
}
out=$1
mib=${2:-512}
tag=${3:-4.16.0}
[[ $mib =~ ^[0-9]+$ ]] && [ "$mib" -ge 16 ] || {
    echo "$0: MIB must be an integer ≥ 16, got $mib" >&2
    exit 2
}
here=$(cd "$(dirname "$0")" && pwd)
real_seed=$here/../seed-fixtures/make-real-seed.sh
mtime=2024-05-14T00:00:00Z

for tool in ostree tar gzip sha256sum openssl; do
    command -v "$tool" >/dev/null || {
        echo "$0: $tool is not installed" >&2
        exit 1
    }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# --- the small seed, unpacked --------------------------------------------------------------------------
bash "$real_seed" "$work/small" "$tag" >/dev/null
small=$work/small
blob_of() { echo "$small/blobs/sha256/${1#sha256:}"; }
manifest_digest=$(grep -o '"digest":"sha256:[0-9a-f]*"' "$small/index.json" | head -1 | cut -d'"' -f4)
small_manifest=$(blob_of "$manifest_digest")
small_config=$(blob_of "$(grep -o '"config":{[^}]*}' "$small_manifest" | grep -o 'sha256:[0-9a-f]*')")
small_layer=$(blob_of "$(grep -o '"layers":\[{[^]]*\]' "$small_manifest" | grep -o 'sha256:[0-9a-f]*')")
root=$work/root
mkdir -p "$root"
tar -xpzf "$small_layer" -C "$root"

# --- deterministic incompressible bulk ---------------------------------------------------------------
# One keystream feeds every bulk file in order; `head -c` reads exactly the bytes it writes.
exec 3< <(openssl enc -aes-128-ctr -nosalt -K 69626920736565642062756c6b000000 \
    -iv 00000000000000000000000000000000 -in /dev/zero 2>/dev/null)
lcg=20240514
rand() { # rand LO HI: sets r to a number in [LO, HI], from a fixed LCG (no subshell: lcg must advance)
    lcg=$(((lcg * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff))
    r=$(($1 + (lcg >> 16) % ($2 - $1 + 1)))
}
# bulk DIR BYTES: files under DIR/dNNN/ totalling BYTES, in the size classes above.
bulk() {
    local dir=$1 total=$2 n=0 done_bytes=0 class_end s
    local -a ends=($((total / 2)) $((total * 8 / 10)) "$total")
    local -a los=($((1 << 20)) $((64 << 10)) $((1 << 10)))
    local -a his=($((8 << 20)) $((1 << 20)) $((64 << 10)))
    for c in 0 1 2; do
        class_end=${ends[c]}
        while [ "$done_bytes" -lt "$class_end" ]; do
            rand "${los[c]}" "${his[c]}"
            s=$r
            [ $((done_bytes + s)) -le "$class_end" ] || s=$((class_end - done_bytes))
            mkdir -p "$dir/d$(printf %03d $((n / 100)))"
            head -c "$s" <&3 >"$dir/d$(printf %03d $((n / 100)))/f$(printf %05d "$n")"
            done_bytes=$((done_bytes + s))
            n=$((n + 1))
        done
    done
    [ "$(du -sb --apparent-size "$dir" | cut -f1)" -ge "$total" ] || {
        echo "$0: short bulk in $dir" >&2
        exit 1
    }
}
total=$((mib << 20))

# --- archives, as make-real-seed.sh writes them ---------------------------------------------------------
pax_opts=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime
tar_common=(--format=posix --owner=0 --group=0 --numeric-owner --mtime="$mtime" --no-recursion)
det_tgz() { # det_tgz DIR DEST [dot]: the whole tree of DIR, members sorted (named ./x with "dot")
    if [ "${3:-}" = dot ]; then
        (cd "$1" && find . -mindepth 1 | sort) >"$work/members"
    else
        (cd "$1" && find . -mindepth 1 -printf '%P\n' | sort) >"$work/members"
    fi
    tar "${tar_common[@]}" --pax-option="$pax_opts" -C "$1" -cf - -T "$work/members" | gzip -n -6 >"$2"
}

# --- ostree.tgz: the seed tree plus the bulk, one commit ---------------------------------------------------
repo=$work/ostree
mkdir -p "$repo"
tar -xzf "$root/ostree.tgz" -C "$repo"
old=$(ostree rev-parse --repo="$repo" ostree/0/1/0)
bulk "$work/otree/usr/lib/ibi-bulk" $((total * 6 / 10))
new=$(ostree commit --repo="$repo" --branch=ostree/0/1/0 --parent=none --tree=ref="$old" \
    --tree=dir="$work/otree" --timestamp="$mtime" --owner-uid=0 --owner-gid=0 --no-xattrs \
    --subject="ibi seed fixture (big)" --add-metadata-string=version=416.94.202405140000-0)
ostree prune --repo="$repo" --refs-only >/dev/null
rm -rf "$work/otree"
det_tgz "$repo" "$root/ostree.tgz" dot
rm -rf "$repo"
sed -i "s/$old/$new/g" "$root/rpm-ostree.json"
mv "$root/ostree-$old.0.origin" "$root/ostree-$new.0.origin"

# --- var.tgz: an etcd-sized db and kubelet bulk -------------------------------------------------------------
v=$work/var
mkdir -p "$v"
tar -xpzf "$root/var.tgz" -C "$v"
head -c $((total / 10)) <&3 >"$v/var/lib/etcd/member/snap/db"
bulk "$v/var/lib/kubelet/ibi-bulk" $((total * 3 / 10))
det_tgz "$v" "$root/var.tgz"
rm -rf "$v"
exec 3<&-

# --- the layer, config, manifest and index ------------------------------------------------------------------
det_tgz "$root" "$work/layer.tgz"
diff_id=$(gzip -dc "$work/layer.tgz" | sha256sum | cut -d' ' -f1)
old_diff_id=$(grep -o '"diff_ids":\["sha256:[0-9a-f]*"' "$small_config" | grep -o '[0-9a-f]\{64\}')
sed "s/$old_diff_id/$diff_id/" "$small_config" >"$work/config.json"
rm -rf "$out"
mkdir -p "$out/blobs/sha256"
blob() { # blob FILE: moves FILE into the layout under its digest, prints "digest size"
    local d s
    d=$(sha "$1")
    s=$(size "$1")
    mv "$1" "$out/blobs/sha256/$d"
    echo "$d $s"
}
read -r layer layer_size < <(blob "$work/layer.tgz")
read -r config config_size < <(blob "$work/config.json")
printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:'$config'","size":'$config_size'},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:'$layer'","size":'$layer_size'}]}' >"$work/manifest.json"
read -r manifest manifest_size < <(blob "$work/manifest.json")
printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
printf '%s' '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:'$manifest'","size":'$manifest_size',"annotations":{"org.opencontainers.image.ref.name":"'$tag'"}}]}' >"$out/index.json"
echo "big seed: $out (tag $tag, sha256:$manifest, layer $layer_size bytes, ostree commit $new)"
