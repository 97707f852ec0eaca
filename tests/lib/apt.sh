# Sourced by tests/run and seed-fixtures/build-examples: apt-get that waits for the package lock.
#
# On a fresh machine an unattended upgrade (or another apt) may hold the dpkg or apt lists lock for
# minutes; apt-get then fails at once with "Could not get lock". `apt_get ARGS` retries while the
# failure is that lock, for at most IBI_APT_LOCK_WAIT seconds (default 900), saying once what it is
# waiting for; any other failure, or the lock still held at the deadline, fails as apt-get did.

apt_get() {
    local wait=${IBI_APT_LOCK_WAIT:-900} start=$SECONDS said=false log rc
    log=$(mktemp)
    while :; do
        # DPkg::Lock::Timeout makes apt wait for the dpkg frontend lock itself; the loop covers the
        # lists lock (apt-get update), which it does not wait for. apt-get's own status, with or
        # without the caller's pipefail, and without tripping its errexit.
        local status=()
        apt-get -o "DPkg::Lock::Timeout=$wait" "$@" 2>&1 | tee "$log" &&
            status=("${PIPESTATUS[@]}") || status=("${PIPESTATUS[@]}")
        rc=${status[0]}
        [ "$rc" = 0 ] && break
        if ! grep -qE 'Could not get lock|Unable to acquire the dpkg frontend lock|Unable to lock directory' "$log" ||
            [ $((SECONDS - start)) -ge "$wait" ]; then
            rm -f "$log"
            return "$rc"
        fi
        if ! $said; then
            echo "apt_get: another package manager holds the lock (an unattended upgrade?); waiting up to ${wait} s (IBI_APT_LOCK_WAIT)" >&2
            said=true
        fi
        sleep 5
    done
    rm -f "$log"
}
