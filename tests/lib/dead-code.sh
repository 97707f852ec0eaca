#!/bin/bash
# Dead code in the ibi crate, found by the compiler (issue 36). ibi's modules are `pub` for its
# integration tests, so rustc cannot see an item nobody calls. This makes a copy of the workspace
# in which every `pub` under src/ (but the crate root's module list and the entry points main.rs
# calls) is `pub(crate)`, checks the library as the product builds it (feature `agent`, without
# `test-support` or `fault-injection`) and fails on any item rustc then finds unused. What only
# tests use belongs in `#[cfg(test)]` or behind the `test-support` feature; a facade's re-export
# that only the tests import is not dead code and is not counted. The crates under crates/ need no
# copy: their items are crate-private unless a crate above uses
# them, and their lints deny dead code.
#
# Usage: tests/lib/dead-code.sh (from anywhere). Shares the target directory with the caller's
# builds (CARGO_TARGET_DIR, or target/), so it only checks, in seconds. tests/run runs it in the
# fast tier.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
copy=$(mktemp -d /tmp/ibi-dead-code.XXXXXX)
trap 'rm -rf "$copy"' EXIT

# The whole source tree (include_str! reaches units/ and friends), a few MB; not target/ or .git.
tar -C "$root" --exclude=./target --exclude=./.git --exclude=./fuzz/target -cf - . | tar -C "$copy" -xf -
find "$copy/src" -name '*.rs' ! -path "$copy/src/lib.rs" ! -path "$copy/src/main.rs" -print0 |
    xargs -0 perl -pi -e 's/\bpub (?!\()/pub(crate) /g'
# What src/main.rs (a crate of its own) calls stays public.
perl -pi -e 's/pub\(crate\) struct Cli\b/pub struct Cli/; s/^(\s*)pub\(crate\) log_level:/$1pub log_level:/' "$copy/src/cli.rs"
perl -pi -e 's/^pub\(crate\) use dispatch::/pub use dispatch::/' "$copy/src/commands.rs"
perl -pi -e 's/pub\(crate\) (fn (report_usage|run|report_error|exit_code)\b)/pub $1/' "$copy/src/commands/dispatch.rs"

out=$(cd "$copy" && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}" cargo check --quiet --lib --features agent \
    --message-format=short 2>&1) || {
    printf '%s\n' "$out" >&2
    echo "tests/lib/dead-code.sh: the copy with crate-private items does not build (see above)" >&2
    exit 1
}
dead=$(printf '%s\n' "$out" | grep -E 'warning: .*(never used|never constructed|never read)' || true)
if [ -n "$dead" ]; then
    echo "tests/lib/dead-code.sh: ibi has code nothing in the product uses (file:line as in src/):" >&2
    printf '%s\n' "$dead" >&2
    echo "remove it, or put it under #[cfg(test)] or #[cfg(any(test, feature = \"test-support\"))]" >&2
    exit 1
fi
echo "tests/lib/dead-code.sh: no dead code in ibi (feature agent)"
