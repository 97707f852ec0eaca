#!/usr/bin/env bash
# What the live status page costs a deploy (docs/performance.md, "The status page's cost"; issue 37
# item 5): the 200-site factory deploy of benches/deploy-scale.sh (one sushy-tools emulator, fake
# driver, --parallel 20), ROUNDS times without --dashboard and with it and three viewers fetching the
# page every two seconds (as the page's script does in a browser), alternating, each in a fresh BASE.
# Prints each run's wall time and pages fetched, and the ratio of the medians (with / without).
# Release build.
#
# Usage: benches/dashboard-cost.sh [SITES] [ROUNDS]     e.g. benches/dashboard-cost.sh 200 3
# Needs what tests/run installs (sushy-tools venv, coreos-installer); run as root like the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
sites=${1:-200}
rounds=${2:-3}
cargo build --release --all-features --bin ibi
IBI_DEPLOY_TEST_BINARY="$PWD/target/release/ibi" IBI_DASHBOARD_SITES="$sites" IBI_DASHBOARD_ROUNDS="$rounds" \
    cargo test --release --all-features --test tools -- --ignored --nocapture dashboard_cost_benchmark
