//! Regenerates the synthetic CoreOS live ISO bundled in `seed-fixtures/` (x86_64-style layout:
//! `igninfo.json` naming `images/ignition.img`, with `kargs.json` slots), or writes a padded one
//! for the benchmark:
//!
//! ```sh
//! cargo run --example make_live_iso -- seed-fixtures/coreos-live-synthetic.iso
//! cargo run --release --example make_live_iso -- /tmp/big.iso 1073741824
//! ```
//! The output is deterministic (fixed dates, sorted tree), so regenerating changes no byte.

use std::fs::File;
use std::io::BufWriter;

use ibi::live_iso::synthetic::{IgnitionLayout, SyntheticIso};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: make_live_iso OUT [PAD_TO_BYTES]"))?;
    let pad_to = args.next().map(|s| s.parse::<u64>()).transpose()?;
    let iso = SyntheticIso {
        pad_to,
        ..SyntheticIso::new(IgnitionLayout::WholeFile, true)
    };
    let written = iso.write(BufWriter::new(File::create(&out)?))?;
    println!("{out}: {written} bytes");
    Ok(())
}
