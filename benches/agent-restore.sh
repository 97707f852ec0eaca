#!/usr/bin/env bash
# Restore benchmark (issue 4 item 8, issue 10 item 4): `ibi agent install` against the lca-cli pipeline
# reproduced with the tools lca-cli calls, on the same machine in the same invocation, one run each,
# for each seed kind of SEED_KINDS (default "os random"), one table per seed.
#
# Setup (untimed): per kind a big seed (benches/make-big-seed.sh with SEED_KIND=<kind>: "os" is about
# 1 GiB of this machine's /usr files in a bare repo, "random" 512 MiB of incompressible bulk in an
# archive repo; SEED_MIB overrides the size for every kind; SEED_CACHE=DIR keeps built seeds there
# (seed-<kind>-<MiB>) and reuses them; SEED_DIR reuses one built layout when a single kind is asked for) pushed with skopeo
# to a throwaway docker-registry on 127.0.0.1 (free port, own config and storage, stopped by PID);
# PRECACHE_IMAGES (default 50; 0: no precache) small images (benches/make-precache-images.sh), which
# the seeds' containers.list names, pushed there too; the fake RHCOS metal image
# (seed-fixtures/make-metal-image.sh).
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
#    and then, timed apart (§4.6), precache: `skopeo copy docker://… containers-storage:[…]…` of
#    every image of containers.list (release registry rewritten to the local one), PRECACHE_PARALLEL
#    (default 10, lca-cli's pool) at a time through xargs -P; PRECACHE_EXTRA_P="2 4" also times
#    those pool sizes, each into a fresh storage beside it (for reading only, not a target).
# b. ibi: a fresh identical disk file as a loop device; `ibi agent install` with skipDiskCleanup,
#    extraPartitionStart -EXTRA_GIB, releaseRegistry the local registry (precacheDisabled when
#    PRECACHE_IMAGES=0), a coreos-installer stand-in that copies the metal image to the disk, the
#    registry marked insecure in its registries.conf, --storage-driver STORAGE_DRIVER. Its restore time
#    is the sum of its fetch-seed + deploy + restore-etc log lines (0.1 s resolution), its precache
#    time its precache line; its whole run is timed too, and every log line gets the seconds since the
#    start (for reading where a step's time goes). Peak RSS: ibi's own VmHWM polled from /proc (10 Hz;
#    the high-water mark only grows) and GNU time's %M (the largest of ibi and the children it waited
#    for, skopeo included).
# Then both targets are compared file by file (type, mode, owner, size, link target and SHA-256 of
# every file of the deployment and the stateroot's var; what ibi's install-host-unit adds aside), and
# the images in both storages counted. Targets (issue 10 item 4): restore ≤ 0.35× the pipeline on the
# os seed, ≤ 0.5× on the random one; precache ≤ 1.0× the 10-way skopeo reference; ibi's peak RSS
# ≤ 64 MiB. IBI_FIRST=1 runs b before a. Each kind ends with one "RESULT kind=…" line.
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
seed_kinds=${SEED_KINDS:-os random}
seed_cache=${SEED_CACHE:-}
precache_n=${PRECACHE_IMAGES:-50}
precache_p=${PRECACHE_PARALLEL:-10}
precache_extra_p=${PRECACHE_EXTRA_P:-}
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
for k in $seed_kinds; do
    case $k in os | random) ;; *)
        echo "SEED_KINDS: unknown kind $k (os, random)" >&2
        exit 2
        ;;
    esac
done
[ -z "${SEED_DIR:-}" ] || [ "$(wc -w <<<"$seed_kinds")" = 1 ] || {
    echo "SEED_DIR names one seed: set SEED_KINDS to its kind" >&2
    exit 2
}
for tool in docker-registry skopeo ostree tar gzip openssl sha256sum jq sfdisk partx losetup mount \
    umount findmnt mkfs.xfs mkfs.ext4 xfs_growfs truncate dd xargs awk /usr/bin/time; do
    command -v "$tool" >/dev/null || skip "$tool is not installed"
done
have_ibi=1
if [ ! -x "$ibi" ] || ! "$ibi" agent install --help >/dev/null 2>&1; then
    have_ibi=0
    echo "note: $ibi has no \`agent install\` (build with --features agent): running the pipeline only"
fi

# The metal image's filesystems have fixed UUIDs: take the machine-wide lock the tests take
# (tests/common/agent.rs METAL_IMAGE_LOCK), so a test and this bench never mount two of them at once.
exec 9>/tmp/ibi-metal-image.lock
flock -w 1800 9 || skip "another test or benchmark holds /tmp/ibi-metal-image.lock"

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
        # Thawed first, never lazily: a frozen or lazily detached filesystem with the metal image's
        # fixed UUID would stay alive and block every later mount of one.
        fsfreeze --unfreeze "$m" 2>/dev/null || true
        umount "$m" || echo "agent-restore: could not unmount $m" >&2
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

# --- registry, seeds, precache images, metal image (untimed) ----------------------------------------------
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

# seed_for KIND: builds (or finds in SEED_CACHE / SEED_DIR) the seed of KIND; its layout dir in $seed_dir.
seed_for() {
    local kind=$1 mib t0
    case $kind in os) mib=${SEED_MIB:-1024} ;; *) mib=${SEED_MIB:-512} ;; esac
    if [ -n "${SEED_DIR:-}" ]; then
        seed_dir=$SEED_DIR
    elif [ -n "$seed_cache" ]; then
        seed_dir=$seed_cache/seed-$kind-$mib
    else
        seed_dir=$work/seed-$kind
    fi
    # A built seed serves when its containers.list names as many images as the precache wants.
    if [ -f "$seed_dir/index.json" ] && [ -f "$seed_dir/containers.list" ] &&
        { [ "$precache_n" = 0 ] || [ "$(grep -c . "$seed_dir/containers.list")" = "$precache_n" ]; }; then
        return
    fi
    [ -z "${SEED_DIR:-}" ] || {
        echo "SEED_DIR $SEED_DIR is not a seed of make-big-seed.sh with PRECACHE_IMAGES=$precache_n" >&2
        return 1
    }
    t0=$(now_us)
    SEED_KIND=$kind PRECACHE_IMAGES=$precache_n bash "$here/make-big-seed.sh" "$seed_dir" "$mib"
    echo "seed built in $(secs $(($(now_us) - t0))) s"
}

# The precache images, pushed once under the names the seeds' containers.list gives them (release
# registry replaced by the local one). Pushes run 10 at a time: untimed setup.
precache_ready=0
push_precache_images() { # push_precache_images LIST
    [ "$precache_n" -gt 0 ] && [ "$precache_ready" = 0 ] || return 0
    [ "$(grep -c . "$1")" = "$precache_n" ] || {
        echo "the seed's containers.list names $(grep -c . "$1") images, PRECACHE_IMAGES is $precache_n" >&2
        return 1
    }
    bash "$here/make-precache-images.sh" "$work/precache" "$precache_n"
    local line
    while read -r line || [ -n "$line" ]; do
        [ -n "$line" ] || continue
        local name=${line#*/}
        local t=${name##*/}
        echo "oci:$work/precache:${t%%:*} docker://$reg/$name"
    done <"$1" | xargs -P 10 -L 1 skopeo copy -q --dest-tls-verify=false
    precache_ready=1
}

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
    rm -rf "$work/a"
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

# skopeo_precache STORAGE P: every image of the live containers.list (registry rewritten) into the
# containers-storage at STORAGE, P at a time, as lca-cli's pool pulls them; prints the wall µs.
skopeo_precache() {
    local storage=$1 p=$2 t0
    sed "s|^release.ibi-fixture.example/|$reg/|" "$work/a/live/var/tmp/containers.list" | grep . >"$work/a/images"
    sync
    t0=$(now_us)
    xargs -P "$p" -I '{}' skopeo copy -q --src-tls-verify=false "docker://{}" \
        "containers-storage:[$driver@$storage+$work/a/run-p$p]{}" <"$work/a/images"
    echo $(($(now_us) - t0))
}

run_pipeline() {
    local mnt=$work/a/mnt storage=$work/a/containers/storage
    local sref="containers-storage:[$driver@$storage+$work/a/run]$seed_ref"
    local m=$work/a/image ws layer booted commit version stateroot deploydir line p
    local -a kargs=()
    phase_us=() phase_rss=()
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
    ref_precache_us=0 ref_precache_images=0
    declare -gA extra_precache_us=()
    if [ "$precache_n" -gt 0 ]; then
        ref_precache_us=$(skopeo_precache "$storage" "$precache_p")
        ref_precache_images=$(jq length "$storage/$driver-images/images.json")
        for p in $precache_extra_p; do
            extra_precache_us[$p]=$(skopeo_precache "$work/a/containers/storage-p$p" "$p")
        done
    fi
    a_summary=$(summarize "$mnt" "$stateroot" "$work/a.files")
    # Both targets' root filesystems carry the metal image's fixed XFS UUID, and XFS refuses to mount
    # a second one while the first is mounted: a's target goes away before b.
    # (containers/storage leaves its overlay dir bind-mounted on itself, under a/containers.)
    for m in $(findmnt -rn -o TARGET | grep "^$work/a/" | sort -r); do umount "$m"; done
    for d in $(losetup -n -O NAME -j "$work/disk-a.img"); do losetup -d "$d"; done
    rm -f "$work/disk-a.img"
}

# summarize ROOT STATEROOT LIST: what the restore produced, to compare a and b. LIST gets one line per
# entry of the deployment (its origin included) and of the stateroot's var: type, mode, owner, size
# and link target or SHA-256, never times. Left out: what ibi's install-host-unit adds (its unit, the
# enable links and the .wants dir only it makes, var/usrlocal/bin/ibi; lca-cli's seed brings lca-cli
# there through var.tgz) and directory sizes (they depend on the order entries were made).
summarize() {
    local st=$2 dd name
    dd=$(ls -d "$1/ostree/deploy/$st/deploy/"*.0)
    name=${dd##*/}
    (
        cd "$1/ostree/deploy/$st"
        find var "deploy/$name" "deploy/$name.origin" ! -type f ! -type d -printf '%y %m %U:%G %s %p -> %l\n'
        find var "deploy/$name" "deploy/$name.origin" -type d -printf '%y %m %U:%G - %p\n'
        find var "deploy/$name" "deploy/$name.origin" -type f -printf '%p\t%y %m %U:%G %s\n' | sort >"$3.meta"
        find var "deploy/$name" "deploy/$name.origin" -type f -print0 | sort -z | xargs -0 -r sha256sum |
            awk '{ h = $1; sub(/^[0-9a-f]+  /, ""); print $0 "\t" h }' >"$3.hash"
        join -t $'\t' "$3.meta" "$3.hash" | awk -F '\t' '{ print $2 " " $1 " " $3 }'
    ) | grep -v -e 'ibi-fetch-config\.service' -e 'installation-configuration\.service\.wants' \
        -e ' var/usrlocal/bin/ibi$' -e ' var/usrlocal/bin/ibi ' | sort -k5 >"$3"
    printf 'deployment %s; origin %s; %s entries, %s file bytes; hostname %s; motd %s; content %s\n' \
        "$st/$name" "$([ -f "$dd.origin" ] && echo yes || echo no)" "$(wc -l <"$3")" \
        "$(awk '$1 == "f" { s += $4 } END { printf "%d", s }' "$3")" \
        "$(cat "$dd/etc/hostname")" "$([ -e "$dd/etc/motd" ] && echo present || echo deleted)" \
        "$(sha256sum "$3" | cut -c1-12)"
}

# --- b. ibi agent install ------------------------------------------------------------------------------------
run_ibi() {
    local b=$work/b f=$work/disk-b.img disk t0 hwm=0 v precache_off=true
    rm -rf "$b"
    mkdir -p "$b/live/var/tmp" "$b/mnt" "$b/containers"
    new_disk "$f"
    disk=$(losetup -f --show "$f")
    [ "$precache_n" = 0 ] || precache_off=false
    printf '{"auths":{}}\n' >"$b/live/var/tmp/pull-secret.json"
    printf '{"installationDisk":"%s","seedImage":"%s","seedVersion":"%s","extraPartitionStart":"-%dG","skipDiskCleanup":true,"precacheDisabled":%s,"releaseRegistry":"%s","shutdown":false}\n' \
        "$disk" "$seed_ref" "$tag" "$extra_gib" "$precache_off" "$reg" >"$b/live/var/tmp/ibi-configuration.json"
    printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$reg" >"$b/registries.conf"
    local -a args=(--log-level info agent install -f "$b/live/var/tmp/ibi-configuration.json"
        --root "$b/live" --sysroot-mount "$b/mnt" --containers-mount "$b/containers"
        --state-file "$b/state.json" --status-file "$b/status.json" --registries-conf "$b/registries.conf"
        --coreos-installer "$work/coreos-installer" --storage-driver "$driver" --fresh)
    sync
    t0=$(now_us)
    # Each log line gets the seconds since the start, to see where a step's time goes. The reader
    # sits on a FIFO, not a process substitution, so that $! below is GNU time's PID.
    mkfifo "$b/log.fifo"
    (while IFS= read -r line; do
        v=${EPOCHREALTIME/./}
        printf '%4d.%02d %s\n' $(((v - t0) / 1000000)) $(((v - t0) % 1000000 / 10000)) "$line"
    done <"$b/log.fifo" >"$b/log") &
    local reader_pid=$!
    /usr/bin/time -f '%e %M' -o "$b/time" "$ibi" "${args[@]}" 2>"$b/log.fifo" &
    time_pid=$!
    while kill -0 "$time_pid" 2>/dev/null; do
        [ -n "$ibi_pid" ] || ibi_pid=$(cat "/proc/$time_pid/task/$time_pid/children" 2>/dev/null || true)
        ibi_pid=${ibi_pid%% *}
        v=$(awk '/^VmHWM:/ { h = $2 } /^VmRSS:/ { r = $2 } END { if (h) print h, r }' "/proc/$ibi_pid/status" 2>/dev/null || true)
        # "seconds RSS-KiB" every sample, kept with KEEP_LOGS: where in the run the peak is.
        [ -z "$v" ] || echo "$(secs $((${EPOCHREALTIME/./} - t0))) ${v#* }" >>"$b/rss"
        v=${v%% *}
        [ -z "$v" ] || [ "$v" -le "$hwm" ] || hwm=$v
        sleep 0.1
    done
    local rc=0
    wait "$time_pid" || rc=$?
    time_pid='' ibi_pid=''
    ibi_us=$(($(now_us) - t0))
    # The timestamping reader ends when ibi's stderr closes.
    wait "$reader_pid" || true
    if [ "$rc" != 0 ]; then
        echo "ibi agent install failed (exit $rc); command:" >&2
        echo "  $ibi ${args[*]}" >&2
        echo "  config: $(cat "$b/live/var/tmp/ibi-configuration.json")" >&2
        tail -30 "$b/log" >&2
        return 1
    fi
    ibi_hwm=$hwm
    ibi_time_rss=$(awk '{ print $2 }' "$b/time")
    # Log lines "…INFO <step>: done in X.Y s[ (counts)]", ANSI colours stripped.
    sed 's/\x1b\[[0-9;]*m//g' "$b/log" | grep -o '[a-z-]*: done in [0-9.]* s' >"$b/steps"
    ibi_restore_us=$(awk '$1 ~ /^(fetch-seed|deploy|restore-etc):$/ { s += $4 } END { printf "%d", s * 1e6 }' "$b/steps")
    ibi_fetch_us=$(awk '$1 == "fetch-seed:" { printf "%d", $4 * 1e6 }' "$b/steps")
    ibi_deploy_us=$(awk '$1 == "deploy:" { printf "%d", $4 * 1e6 }' "$b/steps")
    ibi_precache_us=$(awk '$1 == "precache:" { printf "%d", $4 * 1e6 }' "$b/steps")
    ibi_precache_us=${ibi_precache_us:-0}
    [ "$(grep -cE '^(fetch-seed|deploy|restore-etc):' "$b/steps")" = 3 ] || {
        echo "ibi log lacks fetch-seed/deploy/restore-etc timings:" >&2
        cat "$b/log" >&2
        return 1
    }
    ibi_precache_images=0
    # Check the result: mount its root (partition 4), boot and the container partition read-only.
    local st=rhcos_${tag//-/_}
    mkdir -p "$b/check"
    part_loop "$f" 4
    mount -o ro "$dev" "$b/check"
    part_loop "$f" 3
    mount -o ro "$dev" "$b/check/boot"
    b_summary=$(summarize "$b/check" "$st" "$work/b.files")
    umount "$b/check/boot" "$b/check"
    if [ "$precache_n" -gt 0 ]; then
        part_loop "$f" 5
        mount -o ro,norecovery "$dev" "$b/check"
        ibi_precache_images=$(jq length "$b/check/storage/$driver-images/images.json")
        umount "$b/check"
    fi
    # The loops over the partitions, then the disk's own, with the kernel partitions partx added (they
    # outlive `losetup -d` and make the next user of that loop device see a stale table).
    for d in $(losetup -n -O NAME -j "$f"); do
        for p in $(losetup -n -O NAME -j "$d"); do losetup -d "$p" || true; done
        partx --delete "$d" 2>/dev/null || true
        losetup -d "$d" || true
    done
    rm -f "$f"
}

# --- per seed kind: both halves, then the report -------------------------------------------------------------
report() {
    local kind=$1 p
    local peak=0
    for p in "${phases[@]}"; do [ "${phase_rss[$p]:-0}" -le "$peak" ] || peak=${phase_rss[$p]}; done
    echo
    echo "== seed $kind: layer $layer_bytes bytes; storage driver $driver; disk ${disk_gib} GiB, extra partition ${extra_gib} GiB"
    echo "a. lca-cli pipeline (s, peak RSS of the largest process in MiB):"
    for p in "${phases[@]}"; do
        printf '   %-11s %7s  %5d\n' "$p" "$(secs "${phase_us[$p]:-0}")" $((${phase_rss[$p]:-0} / 1024))
    done
    printf '   %-11s %7s  %5d\n' total "$(secs "$pipeline_us")" $((peak / 1024))
    echo "   result: $a_summary"
    if [ "$precache_n" -gt 0 ]; then
        printf '   precache: %d images, skopeo copy %d-way: %s s (%d images in the storage)\n' \
            "$precache_n" "$precache_p" "$(secs "$ref_precache_us")" "$ref_precache_images"
        for p in $precache_extra_p; do
            printf '   precache, %d-way (not a target): %s s\n' "$p" "$(secs "${extra_precache_us[$p]}")"
        done
    fi
    [ "$have_ibi" = 1 ] || return 0
    echo "b. ibi agent install (s, from its log):"
    sed 's/^/   /' "$work/b/steps"
    printf '   restore (fetch-seed + deploy + restore-etc) %s s; whole run %s s\n' \
        "$(secs "$ibi_restore_us")" "$(secs "$ibi_us")"
    printf '   peak RSS: ibi VmHWM %d MiB; GNU time %%M (ibi or a waited child) %d MiB\n' \
        $((ibi_hwm / 1024)) $((ibi_time_rss / 1024))
    echo "   result: $b_summary"
    local same=no
    if cmp -s "$work/a.files" "$work/b.files"; then
        same=yes
        echo "   same restored content in a and b (what install-host-unit adds aside)"
    else
        echo "WARNING: a and b differ; entries only in a (<) or only in b (>):"
        diff "$work/a.files" "$work/b.files" | grep '^[<>]' | head -40 | sed 's/^/     /' || true
    fi
    local ratio pratio target
    case $kind in os) target=0.35 ;; *) target=0.50 ;; esac
    ratio=$(awk -v i="$ibi_restore_us" -v p="$pipeline_us" 'BEGIN { printf "%.2f", i / p }')
    awk -v i="$ibi_restore_us" -v p="$pipeline_us" -v c="${phase_us[cleanup]:-0}" -v t="$target" 'BEGIN {
        printf "ratio ibi restore / pipeline: %.2fx (target <= %.2fx); without the pipeline cleanup phase: %.2fx\n", i / p, t, i / (p - c) }'
    pratio=-
    if [ "$precache_n" -gt 0 ]; then
        pratio=$(awk -v i="$ibi_precache_us" -v p="$ref_precache_us" 'BEGIN { printf "%.2f", i / p }')
        printf 'precache: ibi %s s (%d images in the storage) / skopeo %d-way %s s: %sx (target <= 1.00x)\n' \
            "$(secs "$ibi_precache_us")" "$ibi_precache_images" "$precache_p" "$(secs "$ref_precache_us")" "$pratio"
    fi
    printf 'RESULT kind=%s layer=%s pipeline=%s pull=%s ostree=%s pull-local=%s deploy=%s var=%s ibi_fetch=%s ibi_deploy=%s ibi_restore=%s ibi_run=%s ratio=%s precache_ref=%s precache_ibi=%s precache_ratio=%s hwm_mib=%d time_rss_mib=%d same=%s\n' \
        "$kind" "$layer_bytes" "$(secs "$pipeline_us")" "$(secs "${phase_us[pull]:-0}")" \
        "$(secs "${phase_us[ostree]:-0}")" "$(secs "${phase_us[pull-local]:-0}")" \
        "$(secs "${phase_us[deploy]:-0}")" "$(secs "${phase_us[var]:-0}")" "$(secs "$ibi_fetch_us")" \
        "$(secs "$ibi_deploy_us")" "$(secs "$ibi_restore_us")" "$(secs "$ibi_us")" "$ratio" \
        "$(secs "$ref_precache_us")" "$(secs "$ibi_precache_us")" "$pratio" $((ibi_hwm / 1024)) \
        $((ibi_time_rss / 1024)) "$same"
    if [ -n "${KEEP_LOGS:-}" ]; then
        mkdir -p "$KEEP_LOGS"
        cp "$work/b/log" "$KEEP_LOGS/ibi-$kind.log"
        cp "$work/b/rss" "$KEEP_LOGS/ibi-$kind.rss" 2>/dev/null || true
        cp "$work/a.files" "$KEEP_LOGS/a-$kind.files"
        cp "$work/b.files" "$KEEP_LOGS/b-$kind.files"
    fi
}

for kind in $seed_kinds; do
    seed_for "$kind"
    seed_ref=$reg/ibi/seed-$kind:$tag
    skopeo copy -q --dest-tls-verify=false "oci:$seed_dir:$tag" "docker://$seed_ref"
    layer_bytes=$(skopeo inspect --tls-verify=false --raw "docker://$seed_ref" | jq '[.layers[].size] | add')
    echo "seed $seed_ref: layer $layer_bytes bytes"
    push_precache_images "$seed_dir/containers.list"
    pipeline_us=0 ibi_us=0
    if [ "${IBI_FIRST:-0}" = 1 ] && [ "$have_ibi" = 1 ]; then
        run_ibi
        run_pipeline
    else
        run_pipeline
        [ "$have_ibi" = 0 ] || run_ibi
    fi
    report "$kind"
done
