#!/usr/bin/env bash
# Builds a big seed image for the restore benchmark (issue 4 item 8, issue 10 item 4;
# benches/agent-restore.sh): seed-fixtures/make-real-seed.sh's seed, enlarged. It runs that script
# into a temp dir, unpacks its one layer, and
#   ostree.tgz   gets a new commit on ostree/0/1/0: the seed tree plus usr/lib/ibi-bulk/… committed
#                with `--tree=ref=<old> --tree=dir=<bulk>`, same timestamp and metadata, no parent; the
#                old commit is pruned, rpm-ostree.json and the origin file's name follow the new checksum
#   var.tgz      gets bulk under var/lib/kubelet/ibi-bulk/… (and, for SEED_KIND=random, an etcd db)
#   containers.list  with PRECACHE_IMAGES=N (N > 0): N lines
#                release.ibi-fixture.example/ibi-bench/precache-NNN:v1, the images
#                benches/make-precache-images.sh writes (tags precache-NNN); also copied to
#                OUTDIR/containers.list beside the layout, so a bench reusing the seed knows what to push
# Every other root file (manifest.json, etc.tgz, etc.deletions, labels) is kept, so the result
# restores like the small seed and passes the seed_cluster_ocp_version check.
#
# SEED_KIND=random (default): incompressible bulk (an AES-CTR keystream with a fixed key, so the same
# on every run) in files of mixed sizes: half the bytes in 1–8 MiB files, 30% in 64 KiB–1 MiB, 20% in
# 1–64 KiB (a few thousand files for 512 MiB), 100 to a directory; ostree gets 60% of MIB, var.tgz an
# etcd db of 10% and kubelet bulk of 30%. The repo stays an archive repo, as make-real-seed.sh makes it.
#
# SEED_KIND=os: the bulk is ordinary OS files (binaries, libraries, text, symlinks) copied from this
# machine's OS_SOURCE (default /usr), so it compresses like a real RHCOS seed: the regular files and
# symlinks of OS_SOURCE (files up to OS_MAX_FILE_MIB, default 16), sorted by path, every k-th one
# with k the largest stride that reaches the share of MIB it fills (85% into the ostree commit under usr/lib/ibi-bulk/<path>, 15% into var.tgz
# under var/lib/kubelet/ibi-bulk/<path>, another offset); MIB counts raw bytes (default 1024: tens of
# thousands of files). The repo is converted to mode bare first (needs root): lca-cli's ostree.tgz is
# `tar czf` of the seed's /ostree/repo, a sysroot repo, and sysroot repos are bare, so a real seed's
# objects are plain files under one gzip, not the archive repo's per-object zlib streams.
# OSTREE_MODE=archive|bare overrides the repo mode for either kind.
#
# Archives are written as make-real-seed.sh writes them (sorted members, fixed mtimes/owners, pax
# without atime/ctime, `gzip -n`), so two runs with the same tools (and, for SEED_KIND=os, the same
# OS_SOURCE) give the same digests.
#
# Usage: make-big-seed.sh OUTDIR [MIB [TAG]]     MIB default 512 (random) or 1024 (os), minimum 16;
#                                                TAG default 4.16.0
# Needs bash, ostree, GNU tar, gzip, sha256sum, openssl; about 3×MIB of free space in TMPDIR; root for
# a bare repo.
set -euo pipefail
export LC_ALL=C TZ=UTC
umask 022

[ $# -ge 1 ] && [ $# -le 3 ] || {
    echo "usage: $0 OUTDIR [MIB [TAG]]" >&2
    exit 2
}
out=$1
kind=${SEED_KIND:-random}
case $kind in
random) mib=${2:-512} mode=${OSTREE_MODE:-archive} ;;
os) mib=${2:-1024} mode=${OSTREE_MODE:-bare} ;;
*)
    echo "$0: SEED_KIND must be random or os, got $kind" >&2
    exit 2
    ;;
esac
tag=${3:-4.16.0}
os_source=${OS_SOURCE:-/usr}
os_max_mib=${OS_MAX_FILE_MIB:-16}
precache_images=${PRECACHE_IMAGES:-0}
[[ $precache_images =~ ^[0-9]+$ ]] && [ "$precache_images" -le 999 ] || {
    echo "$0: PRECACHE_IMAGES must be an integer in 0..999, got $precache_images" >&2
    exit 2
}
[ "$mode" = archive ] || [ "$mode" = bare ] || {
    echo "$0: OSTREE_MODE must be archive or bare, got $mode" >&2
    exit 2
}
[ "$mode" = archive ] || [ "$(id -u)" = 0 ] || {
    echo "$0: a bare repo keeps real owners: run as root (or OSTREE_MODE=archive)" >&2
    exit 1
}
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

# --- OS files (SEED_KIND=os) ----------------------------------------------------------------------------
os_list=$work/os-files
if [ "$kind" = os ]; then
    [ -d "$os_source" ] || {
        echo "$0: OS_SOURCE $os_source is not a directory" >&2
        exit 1
    }
    # "size<TAB>path" of every regular file up to OS_MAX_FILE_MIB and every symlink (0 bytes),
    # sorted by path. Leaving out the few huge files (toolchains, JDK module images) keeps the sample
    # at tens of thousands of files per GiB, the mix of an OS tree. Names with a newline or a tab could
    # not be listed this way; an OS tree has none, skip them.
    (cd "$os_source" && find . -xdev \( -type f -size -$((os_max_mib << 10))k -printf '%s\t%P\n' \
        -o -type l -printf '0\t%P\n' \)) |
        grep -v $'\t.*\t' | sort -t $'\t' -k2 >"$os_list"
fi
# os_bulk DIR BYTES OFFSET: every k-th entry of the OS list (starting OFFSET/1000 into a stride),
# with k the largest stride whose sample reaches BYTES, so the sample spans the whole tree; it stops
# at BYTES. Copied under DIR with its modes.
os_bulk() {
    local dir=$1 want=$2 offset=$3
    awk -F '\t' -v want="$want" -v offset="$offset" '
        { size[NR] = $1; path[NR] = $2 }
        END {
            for (k = 64; k >= 1; k--) {
                s = 0
                for (i = 1 + int(k * offset / 1000); i <= NR; i += k) s += size[i]
                if (s >= want) break
            }
            if (k < 1) { print "short" > "/dev/stderr"; exit 1 }
            s = 0
            for (i = 1 + int(k * offset / 1000); i <= NR && s < want; i += k) { s += size[i]; print path[i] }
        }' "$os_list" >"$work/picked" || {
        echo "$0: $os_source has fewer than $want bytes in files of at most $os_max_mib MiB" >&2
        exit 1
    }
    mkdir -p "$dir"
    tar -C "$os_source" --no-recursion -cf - -T "$work/picked" | tar -C "$dir" -xpf -
    echo "  $(wc -l <"$work/picked") OS files and symlinks, $(du -sb --apparent-size "$dir" | cut -f1) bytes -> ${dir#"$work"/}" >&2
}

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
if [ "$mode" = bare ]; then
    # The same commit in a bare repo: objects become plain files with their modes and owners.
    ostree init --mode=bare --repo="$work/bare"
    ostree pull-local --repo="$work/bare" "$repo" ostree/0/1/0 >/dev/null
    rm -rf "$repo"
    mv "$work/bare" "$repo"
fi
if [ "$kind" = os ]; then
    os_bulk "$work/otree/usr/lib/ibi-bulk" $((total * 85 / 100)) 0
else
    bulk "$work/otree/usr/lib/ibi-bulk" $((total * 6 / 10))
fi
new=$(ostree commit --repo="$repo" --branch=ostree/0/1/0 --parent=none --tree=ref="$old" \
    --tree=dir="$work/otree" --timestamp="$mtime" --owner-uid=0 --owner-gid=0 --no-xattrs \
    --subject="ibi seed fixture (big)" --add-metadata-string=version=416.94.202405140000-0)
ostree prune --repo="$repo" --refs-only >/dev/null
rm -rf "$work/otree"
det_tgz "$repo" "$root/ostree.tgz" dot
rm -rf "$repo"
sed -i "s/$old/$new/g" "$root/rpm-ostree.json"
mv "$root/ostree-$old.0.origin" "$root/ostree-$new.0.origin"

# --- var.tgz: kubelet bulk (and for random, an etcd-sized db) ---------------------------------------------
v=$work/var
mkdir -p "$v"
tar -xpzf "$root/var.tgz" -C "$v"
if [ "$kind" = os ]; then
    os_bulk "$v/var/lib/kubelet/ibi-bulk" $((total * 15 / 100)) 500
else
    head -c $((total / 10)) <&3 >"$v/var/lib/etcd/member/snap/db"
    bulk "$v/var/lib/kubelet/ibi-bulk" $((total * 3 / 10))
fi
det_tgz "$v" "$root/var.tgz"
rm -rf "$v"
exec 3<&-

# --- containers.list: the bench's precache images ------------------------------------------------------------
if [ "$precache_images" -gt 0 ]; then
    # lca-cli writes the list without a trailing newline.
    for i in $(seq 1 "$precache_images"); do
        printf '%s/ibi-bench/precache-%03d:v1\n' "${FAKE_REGISTRY:-release.ibi-fixture.example}" "$i"
    done | head -c -1 >"$root/containers.list"
fi

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
cp "$root/containers.list" "$out/containers.list"
printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
printf '%s' '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:'$manifest'","size":'$manifest_size',"annotations":{"org.opencontainers.image.ref.name":"'$tag'"}}]}' >"$out/index.json"
echo "big seed: $out ($kind, $mode repo, tag $tag, sha256:$manifest, layer $layer_size bytes, ostree commit $new)"
