#!/usr/bin/env bash
# Restore benchmark (issue 4 item 8): `ibi agent install` against the lca-cli pipeline reproduced with
# the tools lca-cli calls, on the same machine in the same invocation, one run each.
#
# Setup (untimed): a big seed (benches/make-big-seed.sh, SEED_MIB MiB, default 512; SEED_DIR reuses a
# built OCI layout) pushed with skopeo to a throwaway docker-registry on 127.0.0.1 (free port, own
# config and storage, stopped by PID); the fake RHCOS metal image (seed-fixtures/make-metal-image.sh).
#
# a. pipeline: a sparse DISK_GIB disk file gets the metal image, an extra partition 5
#    (var-lib-containers, the last EXTRA_GIB) formatted xfs, root grown over the gap; root mounted at
#    a/mnt, boot at a/mnt/boot, partition 5 at a/containers (all untimed: ibi's write-rhcos ..
#    mount-targets). Then, timed, lca-cli's §4.4–4.5:
#      pull      skopeo copy docker://… containers-storage:[DRIVER@a/containers/storage+a/run]…
#                (lca-cli: podman pull into the extra partition's storage)
#      mount     a read-only overlay of the image's one layer over an empty dir (lca-cli: podman image
#                mount, which mounts such an overlay; vfs: a read-only bind of the layer dir)
#      ostree    tar xzf ostree.tgz -C <workspace on the target root> --selinux --xattrs
#                --xattrs-include='*' --acls
#      pull-local  ostree pull-local --repo a/mnt/ostree/repo <workspace>
#      deploy    ostree admin os-init; ostree admin deploy --os <stateroot> --no-prune --sysroot a/mnt
#                --karg-append … <commit>; ostree admin status; origin copy
#      var       tar xzf var.tgz -C a/mnt/ostree/deploy/<stateroot> (same tar options)
#      etc       tar xzf etc.tgz -C <deploydir>; rm -rf of each etc.deletions line (a missing path is
#                skipped where lca-cli would abort); containers.list and manifest.json copied
#      cleanup   umount the image, skopeo delete (podman rmi), rm -rf the workspace
# b. ibi: a fresh identical disk file as a loop device; `ibi agent install` with precacheDisabled,
#    skipDiskCleanup, extraPartitionStart -EXTRA_GIB, a coreos-installer stand-in that copies the
#    metal image to the disk, the registry marked insecure in its registries.conf. Its restore time is
#    the sum of its fetch-seed + deploy + restore-etc log lines (0.1 s resolution); its whole run is
#    timed too. Peak RSS: ibi's own VmHWM polled from /proc (10 Hz; the high-water mark only grows) and
#    GNU time's %M (the largest of ibi and the children it waited for, skopeo included).
# Then both targets are checked for the same restored content, and a table with the ratio printed.
# Target: ibi restore ≤ 0.7× the pipeline. IBI_FIRST=1 runs b before a.
#
# Usage: agent-restore.sh                  (root; IBI=path, default target/release/ibi built with
#                                          --features agent; STORAGE_DRIVER overlay|vfs, default overlay)
# Not root or a tool missing: prints SKIP and exits 0. No ibi binary with `agent install`: runs a only.
# Every mount, loop device, the registry and the temp dir (TMPDIR) are undone on exit, failure included.
set -euo pipefail
export LC_ALL=C TZ=UTC
umask 022

here=$(cd "$(dirname "$0")" && pwd)
repo_root=$(cd "$here/.." && pwd)
seed_mib=${SEED_MIB:-512}
seed_dir=${SEED_DIR:-}
ibi=${IBI:-$repo_root/target/release/ibi}
driver=${STORAGE_DRIVER:-overlay}
disk_gib=${DISK_GIB:-6}
extra_gib=${EXTRA_GIB:-2}
tag=4.16.0
tar_opts=(--selinux --xattrs --xattrs-include='*' --acls)

skip() {
    echo "SKIP agent-restore: $*"
    exit 0
}
[ "$(id -u)" = 0 ] || skip "needs root (loop devices, mounts)"
for tool in docker-registry skopeo ostree tar gzip openssl sha256sum jq sfdisk partx losetup mount \
    umount findmnt mkfs.xfs mkfs.ext4 xfs_growfs truncate dd /usr/bin/time; do
    command -v "$tool" >/dev/null || skip "$tool is not installed"
done
have_ibi=1
if [ ! -x "$ibi" ] || ! "$ibi" agent install --help >/dev/null 2>&1; then
    have_ibi=0
    echo "note: $ibi has no \`agent install\` (build with --features agent): running the pipeline only"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/agent-restore.XXXXXX")
reg_pid='' time_pid='' ibi_pid=''
cleanup() {
    local rc=$? m f d p
    trap - EXIT INT TERM
    # GNU time does not pass signals on: stop ibi itself (its mounts are undone below), then time.
    if [ -n "$ibi_pid" ]; then
        kill "$ibi_pid" 2>/dev/null || true
        for _ in $(seq 50); do [ -d "/proc/$ibi_pid" ] || break; sleep 0.1; done
        kill -KILL "$ibi_pid" 2>/dev/null || true
    fi
    [ -z "$time_pid" ] || wait "$time_pid" 2>/dev/null || true
    for m in $(findmnt -rn -o TARGET | grep "^$work/" | sort -r); do
        umount "$m" 2>/dev/null || umount -l "$m" || true
    done
    # Loops over the disk files, and loops over those (ibi's partition loops over its disk loop).
    for f in "$work"/disk-*.img; do
        [ -e "$f" ] || continue
        for d in $(losetup -n -O NAME -j "$f"); do
            for p in $(losetup -n -O NAME -j "$d"); do losetup -d "$p" || true; done
            partx --delete "$d" 2>/dev/null || true
            losetup -d "$d" || true
        done
    done
    [ -z "$reg_pid" ] || { kill "$reg_pid" 2>/dev/null && wait "$reg_pid" 2>/dev/null || true; }
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_us() { echo "${EPOCHREALTIME/./}"; }
secs() { awk -v us="$1" 'BEGIN { printf "%.1f", us / 1e6 }'; }

# --- seed, registry, metal image (untimed) ------------------------------------------------------------
if [ -z "$seed_dir" ]; then
    seed_dir=$work/seed
    t0=$(now_us)
    bash "$here/make-big-seed.sh" "$seed_dir" "$seed_mib"
    echo "seed built in $(secs $(($(now_us) - t0))) s"
fi

free_port() {
    local p
    for _ in $(seq 100); do
        p=$((20000 + RANDOM % 40000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || {
            echo "$p"
            return
        }
    done
    echo "no free port found" >&2
    return 1
}
port=$(free_port)
reg=127.0.0.1:$port
mkdir -p "$work/registry"
cat >"$work/registry/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $work/registry/storage
  delete:
    enabled: true
http:
  addr: $reg
  secret: ibi-bench-secret
EOF
docker-registry serve "$work/registry/config.yml" >"$work/registry/log" 2>&1 &
reg_pid=$!
for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 "$reg_pid" 2>/dev/null || {
        cat "$work/registry/log" >&2
        exit 1
    }
    sleep 0.1
done
seed_ref=$reg/ibi/seed:$tag
skopeo copy -q --dest-tls-verify=false "oci:$seed_dir:$tag" "docker://$seed_ref"
layer_bytes=$(skopeo inspect --tls-verify=false --raw "docker://$seed_ref" | jq '[.layers[].size] | add')
echo "seed $seed_ref: layer $layer_bytes bytes"

metal=$work/metal.img
bash "$repo_root/seed-fixtures/make-metal-image.sh" "$metal" 1G >/dev/null
disk_bytes=$((disk_gib << 30))
new_disk() { # new_disk FILE: a sparse all-zero disk file
    truncate -s "$disk_bytes" "$1"
}

# coreos-installer stand-in, for ibi and for a's untimed setup alike.
cat >"$work/coreos-installer" <<EOF
#!/bin/sh
# coreos-installer stand-in (agent-restore bench): \`install DISK [ARGS…]\` writes the fake metal image.
[ "\$1" = install ] && [ -n "\$2" ] || { echo "coreos-installer stand-in: expected install DISK" >&2; exit 2; }
exec dd if="$metal" of="\$2" bs=4M conv=notrunc,sparse,fsync status=none
EOF
chmod 0755 "$work/coreos-installer"

# --- a. the lca-cli pipeline -------------------------------------------------------------------------------
declare -A phase_us phase_rss
phases=(pull mount ostree pull-local deploy var etc cleanup)
# step PHASE CMD…: runs CMD under GNU time, adds its wall time to PHASE and keeps the peak RSS.
step() {
    local name=$1 t0 rss
    shift
    t0=$(now_us)
    /usr/bin/time -f %M -o "$work/rss" "$@" >/dev/null
    phase_us[$name]=$((${phase_us[$name]:-0} + $(now_us) - t0))
    rss=$(tail -1 "$work/rss")
    [ "$rss" -le "${phase_rss[$name]:-0}" ] || phase_rss[$name]=$rss
}
# part_loop FILE N: a loop device over partition N's byte range, in $dev.
part_loop() {
    local start sectors
    read -r start sectors < <(partx -g -o START,SECTORS -n "$2" "$1")
    dev=$(losetup -f --show -o $((start * 512)) --sizelimit $((sectors * 512)) "$1")
}

prepare_pipeline_target() { # ibi's write-rhcos .. mount-targets, with sfdisk and losetup
    local f=$work/disk-a.img start
    new_disk "$f"
    "$work/coreos-installer" install "$f"
    sfdisk -q --relocate gpt-bak-std "$f" 2>/dev/null
    start=$(((disk_bytes - (extra_gib << 30)) / 512 / 2048 * 2048))
    echo "start=$start,name=var-lib-containers" | sfdisk -q --append "$f" 2>/dev/null
    echo ",+" | sfdisk -q -N 4 "$f" 2>/dev/null
    mkdir -p "$work/a/mnt" "$work/a/containers" "$work/a/run" "$work/a/live/var/tmp"
    part_loop "$f" 5
    mkfs.xfs -q -f "$dev"
    mount "$dev" "$work/a/containers"
    part_loop "$f" 4
    mount "$dev" "$work/a/mnt"
    xfs_growfs "$work/a/mnt" >/dev/null
    part_loop "$f" 3
    mount "$dev" "$work/a/mnt/boot"
}

run_pipeline() {
    local mnt=$work/a/mnt storage=$work/a/containers/storage
    local sref="containers-storage:[$driver@$storage+$work/a/run]$seed_ref"
    local m=$work/a/image ws layer booted commit version stateroot deploydir line
    local -a kargs=()
    prepare_pipeline_target
    sync
    local t0
    t0=$(now_us)
    step pull skopeo copy -q --src-tls-verify=false "docker://$seed_ref" "$sref"
    layer=$(jq -r --arg n "$seed_ref" '.[] | select(.names[]? == $n) | .layer' "$storage/$driver-images/images.json")
    mkdir -p "$m"
    if [ "$driver" = overlay ]; then
        # Overlay wants two lower layers when it has no upper one; containers/storage adds an empty one.
        mkdir -p "$work/a/empty"
        step mount mount -t overlay overlay -o "ro,lowerdir=$storage/overlay/$layer/diff:$work/a/empty" "$m"
    else
        step mount mount --bind -o ro "$storage/vfs/dir/$layer" "$m"
    fi
    ws=$mnt/ibi-bench-workspace
    step ostree mkdir -p "$ws/ostree"
    step ostree tar xzf "$m/ostree.tgz" -C "$ws/ostree" "${tar_opts[@]}"
    booted=$(jq -r '.deployments[] | select(.booted) | .id' "$m/rpm-ostree.json")
    booted=${booted##*-}
    commit=${booted%%.*}
    version=$(jq -r .seed_cluster_ocp_version "$m/manifest.json")
    [ "$version" = "$tag" ] || {
        echo "seed version $version differs from $tag" >&2
        return 1
    }
    stateroot=rhcos_${version//-/_}
    step pull-local ostree pull-local --repo "$mnt/ostree/repo" "$ws/ostree"
    step deploy ostree admin os-init --sysroot "$mnt" "$stateroot"
    while read -r line; do kargs+=(--karg-append "$line"); done \
        < <(jq -r '.spec.kernelArguments[]' "$m/mco-currentconfig.json")
    step deploy ostree admin deploy --os "$stateroot" --no-prune --sysroot "$mnt" "${kargs[@]}" "$commit"
    step deploy sh -c "ostree admin status --sysroot '$mnt' >'$work/a/status'"
    deploydir=$mnt/ostree/deploy/$stateroot/deploy/$(awk -v s="$stateroot" '{ if ($1 == "*") $1 = ""; $0 = $0 } $1 == s { print $2; exit }' "$work/a/status")
    step deploy cp "$m/ostree-$booted.origin" "$deploydir.origin"
    step var tar xzf "$m/var.tgz" -C "$mnt/ostree/deploy/$stateroot" "${tar_opts[@]}"
    step etc tar xzf "$m/etc.tgz" -C "$deploydir" "${tar_opts[@]}"
    while read -r line; do
        line=$(echo "$line" | tr -d ' ')
        [ -n "$line" ] || continue
        step etc rm -rf "$deploydir$line"
    done <"$m/etc.deletions"
    step etc cp "$m/containers.list" "$m/manifest.json" "$work/a/live/var/tmp/"
    step cleanup umount "$m"
    step cleanup skopeo delete "$sref"
    step cleanup rm -rf "$ws"
    pipeline_us=$(($(now_us) - t0))
    a_summary=$(summarize "$mnt" "$stateroot" "$work/a.var")
    # Both targets' root filesystems carry the metal image's fixed XFS UUID, and XFS refuses to mount
    # a second one while the first is mounted: a's target goes away before b.
    # (containers/storage leaves its overlay dir bind-mounted on itself, under a/containers.)
    for m in $(findmnt -rn -o TARGET | grep "^$work/a/" | sort -r); do umount "$m"; done
    for d in $(losetup -n -O NAME -j "$work/disk-a.img"); do losetup -d "$d"; done
    rm -f "$work/disk-a.img"
}

# summarize ROOT STATEROOT LIST: what the restore produced, to compare a and b; the stateroot var's
# files ("size path") go to LIST, except var/usrlocal/bin/ibi, which ibi's install-host-unit adds
# (the binary its host unit runs; lca-cli's seed brings lca-cli there through var.tgz).
summarize() {
    local st=$2 dd
    dd=$(ls -d "$1/ostree/deploy/$st/deploy/"*.0)
    (cd "$1/ostree/deploy/$st" && find var -type f ! -path var/usrlocal/bin/ibi -printf '%s %p\n' | sort -k2) >"$3"
    printf 'deployment %s; origin %s; var %s files %s bytes; db %s; bulk-file %s; hostname %s; motd %s\n' \
        "$st/${dd##*/}" "$([ -f "$dd.origin" ] && echo yes || echo no)" "$(wc -l <"$3")" \
        "$(awk '{ s += $1 } END { print s }' "$3")" \
        "$(sha256sum "$1/ostree/deploy/$st/var/lib/etcd/member/snap/db" | cut -c1-12)" \
        "$(sha256sum "$dd/usr/lib/ibi-bulk/d000/f00000" | cut -c1-12)" \
        "$(cat "$dd/etc/hostname")" "$([ -e "$dd/etc/motd" ] && echo present || echo deleted)"
}

# --- b. ibi agent install ------------------------------------------------------------------------------------
run_ibi() {
    local b=$work/b f=$work/disk-b.img disk t0 hwm=0 v
    mkdir -p "$b/live/var/tmp" "$b/mnt" "$b/containers"
    new_disk "$f"
    disk=$(losetup -f --show "$f")
    printf '{"auths":{}}\n' >"$b/live/var/tmp/pull-secret.json"
    printf '{"installationDisk":"%s","seedImage":"%s","seedVersion":"%s","extraPartitionStart":"-%dG","skipDiskCleanup":true,"precacheDisabled":true,"shutdown":false}\n' \
        "$disk" "$seed_ref" "$tag" "$extra_gib" >"$b/live/var/tmp/ibi-configuration.json"
    printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$reg" >"$b/registries.conf"
    sync
    t0=$(now_us)
    /usr/bin/time -f '%e %M' -o "$b/time" "$ibi" --log-level info agent install \
        -f "$b/live/var/tmp/ibi-configuration.json" --root "$b/live" --sysroot-mount "$b/mnt" \
        --containers-mount "$b/containers" --state-file "$b/state.json" --status-file "$b/status.json" \
        --registries-conf "$b/registries.conf" --coreos-installer "$work/coreos-installer" --fresh \
        2>"$b/log" &
    time_pid=$!
    while kill -0 "$time_pid" 2>/dev/null; do
        [ -n "$ibi_pid" ] || ibi_pid=$(cat "/proc/$time_pid/task/$time_pid/children" 2>/dev/null || true)
        ibi_pid=${ibi_pid%% *}
        v=$(awk '/^VmHWM:/ { print $2 }' "/proc/$ibi_pid/status" 2>/dev/null || true)
        [ -z "$v" ] || [ "$v" -le "$hwm" ] || hwm=$v
        sleep 0.1
    done
    local rc=0
    wait "$time_pid" || rc=$?
    time_pid='' ibi_pid=''
    ibi_us=$(($(now_us) - t0))
    if [ "$rc" != 0 ]; then
        echo "ibi agent install failed (exit $rc); command:" >&2
        echo "  $ibi --log-level info agent install -f $b/live/var/tmp/ibi-configuration.json --root $b/live --sysroot-mount $b/mnt --containers-mount $b/containers --state-file $b/state.json --status-file $b/status.json --registries-conf $b/registries.conf --coreos-installer $work/coreos-installer --fresh" >&2
        echo "  config: $(cat "$b/live/var/tmp/ibi-configuration.json")" >&2
        tail -30 "$b/log" >&2
        return 1
    fi
    ibi_hwm=$hwm
    ibi_time_rss=$(awk '{ print $2 }' "$b/time")
    # Log lines "…INFO <step>: done in X.Y s[ (counts)]", ANSI colours stripped.
    sed 's/\x1b\[[0-9;]*m//g' "$b/log" | grep -o '[a-z-]*: done in [0-9.]* s' >"$b/steps"
    ibi_restore_us=$(awk '$1 ~ /^(fetch-seed|deploy|restore-etc):$/ { s += $4 } END { printf "%d", s * 1e6 }' "$b/steps")
    [ "$(grep -cE '^(fetch-seed|deploy|restore-etc):' "$b/steps")" = 3 ] || {
        echo "ibi log lacks fetch-seed/deploy/restore-etc timings:" >&2
        cat "$b/log" >&2
        return 1
    }
    # Check the result: mount its root (partition 4) and boot read-only.
    local st=rhcos_${tag//-/_}
    mkdir -p "$b/check"
    part_loop "$f" 4
    mount -o ro "$dev" "$b/check"
    part_loop "$f" 3
    mount -o ro "$dev" "$b/check/boot"
    b_summary=$(summarize "$b/check" "$st" "$work/b.var")
    umount "$b/check/boot" "$b/check"
}

pipeline_us=0 ibi_us=0
if [ "${IBI_FIRST:-0}" = 1 ] && [ "$have_ibi" = 1 ]; then
    run_ibi
    run_pipeline
else
    run_pipeline
    [ "$have_ibi" = 0 ] || run_ibi
fi

# --- report --------------------------------------------------------------------------------------------------
peak=0
for p in "${phases[@]}"; do [ "${phase_rss[$p]:-0}" -le "$peak" ] || peak=${phase_rss[$p]}; done
echo
echo "seed: layer $layer_bytes bytes; storage driver $driver; disk ${disk_gib} GiB, extra partition ${extra_gib} GiB"
echo "a. lca-cli pipeline (s, peak RSS of the largest process in MiB):"
for p in "${phases[@]}"; do
    printf '   %-11s %7s  %5d\n' "$p" "$(secs "${phase_us[$p]:-0}")" $((${phase_rss[$p]:-0} / 1024))
done
printf '   %-11s %7s  %5d\n' total "$(secs "$pipeline_us")" $((peak / 1024))
echo "   result: $a_summary"
if [ "$have_ibi" = 1 ]; then
    echo "b. ibi agent install (s, from its log):"
    sed 's/^/   /' "$work/b/steps"
    printf '   restore (fetch-seed + deploy + restore-etc) %s s; whole run %s s\n' \
        "$(secs "$ibi_restore_us")" "$(secs "$ibi_us")"
    printf '   peak RSS: ibi VmHWM %d MiB; GNU time %%M (ibi or a waited child) %d MiB\n' \
        $((ibi_hwm / 1024)) $((ibi_time_rss / 1024))
    echo "   result: $b_summary"
    if [ "$a_summary" = "$b_summary" ]; then
        echo "   same restored content in a and b (var/usrlocal/bin/ibi aside)"
    else
        echo "WARNING: a and b differ; var files only in a (<) or only in b (>), or of another size:"
        diff "$work/a.var" "$work/b.var" | grep '^[<>]' | sed 's/^/     /' || true
    fi
    awk -v i="$ibi_restore_us" -v p="$pipeline_us" -v c="${phase_us[cleanup]:-0}" 'BEGIN {
        printf "ratio ibi restore / pipeline: %.2fx (target <= 0.70x); without the pipeline cleanup phase: %.2fx\n", i / p, i / (p - c) }'
fi
