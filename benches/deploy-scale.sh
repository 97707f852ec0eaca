#!/usr/bin/env bash
# ibi deploy's cost against the size of the fleet (docs/performance.md, "Deploy at scale"): the factory
# phase for 20, 100 and 200 sites of one sushy-tools emulator process (fake driver, one System per site),
# the hosts played by the test's reporters, at --parallel 20, each size in a fresh BASE. For each size:
# wall time per site, deploy's peak RSS and peak thread count (sampled from /proc every 100 ms), and
# the last two as ratios to the first size's, run in the same invocation. Release build.
#
# Usage: benches/deploy-scale.sh [SIZES] [PARALLEL]     e.g. benches/deploy-scale.sh 20,100,200 20
# Needs what tests/run installs (sushy-tools venv, coreos-installer); run as root like the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
sizes=${1:-20,100,200}
parallel=${2:-20}
cargo build --release --all-features --bin ibi
IBI_DEPLOY_TEST_BINARY="$PWD/target/release/ibi" IBI_SCALE_SIZES="$sizes" IBI_SCALE_PARALLEL="$parallel" \
    cargo test --release --all-features --test tools -- --ignored --nocapture deploy_scale_benchmark
