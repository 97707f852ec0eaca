#!/usr/bin/env bash
# Benchmark: `ibi serve` against nginx (what a user would otherwise set up) serving the same 1 GiB
# file over TLS on 127.0.0.1 to 1, 4 and 16 concurrent curl clients, in the same run. Reports
# aggregate throughput (client bytes / wall time, all clients started together) and the servers'
# peak resident memory (VmHWM; for nginx the master plus every worker). Each server is restarted
# for each client count so each peak belongs to one row.
#
# Then (section "idle"): one download by a BMC (curl from 127.0.0.2) while 300 silent connections
# from 127.0.0.1 are open, against the same download with none, from the same fresh `ibi serve`
# each round. Results go in docs/performance.md.
#
# Needs: a release build (`cargo build --release`), nginx (Debian `nginx-light` or `nginx`), curl,
# bc, python3.
# Usage: benches/deliver.sh [SIZE_MIB] [ROUNDS]   (defaults 1024 and 2; the best round is kept)
#        SECTIONS="nginx idle" (default both), IBI=path/to/ibi (default target/release/ibi)
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE_MIB=${1:-1024}
ROUNDS=${2:-2}
SECTIONS=${SECTIONS:-nginx idle}
IDLE=300
IBI=${IBI:-target/release/ibi}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[ -x "$IBI" ] || { echo "build first: cargo build --release" >&2; exit 1; }
if [[ " $SECTIONS " == *" nginx "* ]]; then
    [ -x "$NGINX" ] || { echo "nginx not found (apt-get install nginx-light)" >&2; exit 1; }
fi

W=$(mktemp -d /tmp/ibi-bench-deliver.XXXXXX)
IBI_PID=""
NGINX_PID=""
HOLD_PID=""
stop_all() {
    [ -n "$HOLD_PID" ] && kill "$HOLD_PID" 2>/dev/null && wait "$HOLD_PID" 2>/dev/null || true
    [ -n "$IBI_PID" ] && kill "$IBI_PID" 2>/dev/null && wait "$IBI_PID" 2>/dev/null || true
    [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null || true
    sleep 0.3
    IBI_PID=""; NGINX_PID=""; HOLD_PID=""
}
trap 'stop_all; rm -rf "$W"' EXIT

mkdir -p "$W/site" "$W/nginx"
chmod 755 "$W" "$W/site" # nginx's workers run as another user
head -c "$((SIZE_MIB << 20))" /dev/urandom > "$W/site/rhcos-ibi.iso"
cat "$W/site/rhcos-ibi.iso" > /dev/null # page cache: both servers read from memory

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

start_ibi() {
    # Not the last run's "listening on": the shell truncates ibi.out only once the job starts.
    rm -f "$W/ibi.out"
    "$IBI" serve --dir "$W/site" --listen 127.0.0.1:0 > "$W/ibi.out" 2> "$W/ibi.err" &
    IBI_PID=$!
    for _ in $(seq 1 600); do grep -q '^listening on' "$W/ibi.out" 2>/dev/null && break; sleep 0.1; done
    IBI_URL=$(awk '$1=="rhcos-ibi.iso"{print $4}' "$W/ibi.out")
}

start_nginx() {
    local port; port=$(free_port)
    cat > "$W/nginx/nginx.conf" <<EOF
worker_processes auto;
pid $W/nginx/nginx.pid;
error_log $W/nginx/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    client_body_temp_path $W/nginx/body;
    proxy_temp_path $W/nginx/proxy;
    fastcgi_temp_path $W/nginx/fastcgi;
    uwsgi_temp_path $W/nginx/uwsgi;
    scgi_temp_path $W/nginx/scgi;
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $W/site/.ibi/serve-tls.crt;
        ssl_certificate_key $W/site/.ibi/serve-tls.key;
        root $W/site;
    }
}
EOF
    "$NGINX" -c "$W/nginx/nginx.conf" -g 'daemon off;' &
    NGINX_PID=$!
    for _ in $(seq 1 100); do curl -s -o /dev/null --cacert "$W/site/.ibi/serve-tls.crt" "https://127.0.0.1:$port/" && break; sleep 0.1; done
    NGINX_URL="https://127.0.0.1:$port/rhcos-ibi.iso"
}

# Peak RSS in KiB of a process and all its children.
peak_kib() {
    local total=0 p
    for p in "$1" $(pgrep -P "$1" || true); do
        total=$((total + $(awk '/^VmHWM/{print $2}' "/proc/$p/status")))
    done
    echo "$total"
}

# Seconds for N parallel full downloads of URL.
run_clients() {
    local n=$1 url=$2 start end i pids=() p
    start=$(date +%s.%N)
    for i in $(seq 1 "$n"); do
        curl -sS --fail --cacert "$W/site/.ibi/serve-tls.crt" -o /dev/null "$url" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do
        wait "$p" || { echo "a download from $url failed" >&2; exit 1; }
    done
    end=$(date +%s.%N)
    echo "$end - $start" | bc -l
}

mib_s() { echo "scale=1; $1 * $SIZE_MIB / $2" | bc -l; }

# The self-signed certificate nginx also uses.
start_ibi; stop_all

if [[ " $SECTIONS " == *" nginx "* ]]; then
echo "| clients | nginx MiB/s | ibi MiB/s | ibi / nginx | nginx peak RSS | ibi peak RSS |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in 1 4 16; do
    best_n=999999; best_i=999999
    start_nginx; start_ibi
    for _ in $(seq 1 "$ROUNDS"); do
        t=$(run_clients "$n" "$NGINX_URL"); (( $(echo "$t < $best_n" | bc) )) && best_n=$t
        t=$(run_clients "$n" "$IBI_URL"); (( $(echo "$t < $best_i" | bc) )) && best_i=$t
    done
    rss_n=$(peak_kib "$NGINX_PID"); rss_i=$(peak_kib "$IBI_PID")
    stop_all
    tn=$(mib_s "$n" "$best_n"); ti=$(mib_s "$n" "$best_i")
    ratio=$(echo "scale=2; $ti / $tn" | bc -l)
    echo "| $n | $tn | $ti | $ratio | $((rss_n / 1024)) MiB | $((rss_i / 1024)) MiB |"
done
fi

# Opens N connections from 127.0.0.1 to PORT that never send a byte, and holds them (the server may
# close them; they are not reopened) until killed; returns once all are open.
hold_idle() {
    local n=$1 port=$2 ready="$W/idle.ready"
    rm -f "$ready"
    python3 -c '
import socket, sys, time
n, port, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
open(ready, "w").close()
time.sleep(3600)
' "$n" "$port" "$ready" &
    HOLD_PID=$!
    for _ in $(seq 1 600); do [ -e "$ready" ] && return; sleep 0.05; done
    echo "the idle connections did not open" >&2; exit 1
}

# Seconds for one full download of URL by a client on 127.0.0.2 (a BMC: another address).
bmc_download() {
    local start end
    start=$(date +%s.%N)
    curl -sS --fail --interface 127.0.0.2 --cacert "$W/site/.ibi/serve-tls.crt" -o /dev/null "$1" \
        || { echo "the download failed" >&2; exit 1; }
    end=$(date +%s.%N)
    echo "$end - $start" | bc -l
}

if [[ " $SECTIONS " == *" idle "* ]]; then
echo
echo "| download | none idle: s | $IDLE idle: s | with / without |"
echo "|---|---:|---:|---:|"
best_0=999999; best_idle=999999
for _ in $(seq 1 "$ROUNDS"); do
    start_ibi
    t=$(bmc_download "$IBI_URL"); (( $(echo "$t < $best_0" | bc) )) && best_0=$t
    port=$(echo "$IBI_URL" | sed -E 's|^https://127\.0\.0\.1:([0-9]+)/.*|\1|')
    hold_idle "$IDLE" "$port"
    t=$(bmc_download "$IBI_URL"); (( $(echo "$t < $best_idle" | bc) )) && best_idle=$t
    stop_all
done
ratio=$(echo "scale=2; $best_idle / $best_0" | bc -l)
printf "| %s MiB from 127.0.0.2 | %.2f | %.2f | %.2f |\n" "$SIZE_MIB" "$best_0" "$best_idle" "$ratio"
fi
