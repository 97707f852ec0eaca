//! The installation ISO of a variant, kept as a patch instead of a 1 GiB file: the base ISO's
//! path and version, the embed-area patches `create image` computed, and the sha256 and size of the
//! ISO they make. `ibi serve` streams base bytes with the patches laid over them
//! ([`crate::live_iso::read_patched_at`]), byte for byte what `create image` would have written.
//!
//! The ETag (the ISO's sha256) is known without writing the file: while the patch is written, the
//! base is read once and both the base's sha256 and the patched stream's sha256 are computed in
//! that one pass. `serve` trusts the recorded hash while the base keeps its size and modification
//! time, and otherwise hashes the base again and refuses it unless it is the same bytes.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use openssl::sha::Sha256;
use serde::{Deserialize, Serialize};

use crate::live_iso::{Patch, overlay, validate_patches};
use crate::util::digest::hex;
use crate::util::file_version::FileVersion;
use crate::util::fs::{Clobber, SECRET_DIR_MODE, SECRET_FILE_MODE, ensure_dir, write_atomic};

/// Where `create image --patch-only` writes, relative to its DIR; `serve` looks there.
pub const RECIPE_FILE: &str = ".ibi/rhcos-ibi.patch.json";
const RECIPE_FORMAT: u32 = 1;
/// Bytes hashed per read.
const HASH_CHUNK: usize = 1 << 20;
/// The recipe holds the pull secret (inside the Ignition patch): bounded when read back.
const MAX_RECIPE_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaseIso {
    pub path: PathBuf,
    pub version: FileVersion,
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredPatch {
    offset: u64,
    /// Base64: the patch is mostly a compressed Ignition config.
    data: String,
}

/// The stored form. `Debug` is not derived: the patches hold the pull secret.
#[derive(Clone, Serialize, Deserialize)]
struct StoredRecipe {
    format: u32,
    base: BaseIso,
    size: u64,
    sha256: String,
    patches: Vec<StoredPatch>,
}

/// A loaded recipe.
#[derive(Clone)]
pub struct Recipe {
    pub base: BaseIso,
    /// Size and sha256 of the ISO the patches make.
    pub size: u64,
    pub sha256: String,
    pub patches: Vec<Patch>,
}

impl std::fmt::Debug for Recipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recipe")
            .field("base", &self.base)
            .field("size", &self.size)
            .field("sha256", &self.sha256)
            .field("patches", &self.patches.len())
            .finish()
    }
}

/// Hashes the base and the patched stream in one read of the base; returns (base, patched).
pub fn hash_base_and_patched(
    base: &File,
    patches: &[Patch],
    len: u64,
) -> std::io::Result<(String, String)> {
    use std::os::unix::fs::FileExt;
    let (mut plain, mut patched) = (Sha256::new(), Sha256::new());
    let mut buf = vec![0u8; HASH_CHUNK];
    let mut offset = 0u64;
    while offset < len {
        let n = HASH_CHUNK.min((len - offset) as usize);
        let chunk = &mut buf[..n];
        base.read_exact_at(chunk, offset)?;
        plain.update(chunk);
        overlay(patches, offset, chunk);
        patched.update(chunk);
        offset += n as u64;
    }
    Ok((hex(&plain.finish()), hex(&patched.finish())))
}

/// Writes the recipe for `base` + `patches` to `out` (0600, atomically) and returns it.
pub fn write_recipe(out: &Path, base: &Path, patches: &[Patch]) -> Result<Recipe> {
    let base = base
        .canonicalize()
        .with_context(|| format!("resolving {}", base.display()))?;
    let file = File::open(&base).with_context(|| format!("opening {}", base.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("reading {}", base.display()))?;
    validate_patches(patches, meta.len()).context("checking the embed-area patches")?;
    let (base_sha, sha256) = hash_base_and_patched(&file, patches, meta.len())
        .with_context(|| format!("hashing {}", base.display()))?;
    let recipe = Recipe {
        base: BaseIso {
            path: base,
            version: FileVersion::of(&meta),
            sha256: base_sha,
        },
        size: meta.len(),
        sha256,
        patches: patches.to_vec(),
    };
    let json = serde_json::to_vec_pretty(&stored(&recipe)).context("encoding the patch file")?;
    if let Some(dir) = out.parent() {
        ensure_dir(dir, SECRET_DIR_MODE)?;
    }
    write_atomic(out, &json, SECRET_FILE_MODE, Clobber::Replace)?;
    Ok(recipe)
}

fn stored(r: &Recipe) -> StoredRecipe {
    StoredRecipe {
        format: RECIPE_FORMAT,
        base: r.base.clone(),
        size: r.size,
        sha256: r.sha256.clone(),
        patches: r
            .patches
            .iter()
            .map(|p| StoredPatch {
                offset: p.offset,
                data: openssl::base64::encode_block(&p.data),
            })
            .collect(),
    }
}

/// Reads a recipe back; its patches are checked against the recorded size.
pub fn load_recipe(path: &Path) -> Result<Recipe> {
    let bytes = crate::util::fs::read_input_file(path, MAX_RECIPE_BYTES)
        .with_context(|| format!("reading {}", path.display()))?;
    parse_recipe(&bytes).with_context(|| format!("reading {}", path.display()))
}

pub fn parse_recipe(bytes: &[u8]) -> Result<Recipe> {
    // serde's messages would quote values, and the values hold the pull secret.
    let s: StoredRecipe = serde_json::from_slice(bytes).map_err(|e| {
        anyhow::anyhow!(
            "not an ibi patch file (line {}, column {})",
            e.line(),
            e.column()
        )
    })?;
    if s.format != RECIPE_FORMAT {
        bail!(
            "patch file format {} (this ibi reads {RECIPE_FORMAT})",
            s.format
        );
    }
    let patches = s
        .patches
        .iter()
        .map(|p| {
            let data = openssl::base64::decode_block(&p.data)
                .map_err(|_| anyhow::anyhow!("the patch at offset {} is not base64", p.offset))?;
            Ok(Patch {
                offset: p.offset,
                data,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    validate_patches(&patches, s.size).context("checking the patches")?;
    if s.size != s.base.version.size {
        bail!(
            "the ISO size {} differs from the base ISO's {}",
            s.size,
            s.base.version.size
        );
    }
    Ok(Recipe {
        base: s.base,
        size: s.size,
        sha256: s.sha256,
        patches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recipe_round_trips_and_hashes_what_the_copy_holds() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("base.iso");
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 241) as u8).collect();
        std::fs::write(&base, &bytes).unwrap();
        let patches = vec![Patch {
            offset: 1_048_570,
            data: vec![7; 20],
        }];
        let out = dir.path().join(".ibi/r.json");
        let r = write_recipe(&out, &base, &patches).unwrap();
        let mut want = bytes.clone();
        want[1_048_570..1_048_590].fill(7);
        let mut h = Sha256::new();
        h.update(&want);
        assert_eq!(r.sha256, hex(&h.finish()));
        let back = load_recipe(&out).unwrap();
        assert_eq!(back.patches, patches);
        assert_eq!((back.size, back.sha256), (r.size, r.sha256));
        assert_eq!(crate_mode(&out), 0o600);
    }

    fn crate_mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn broken_recipes_are_refused_without_quoting_them() {
        let err = parse_recipe(b"{\"format\": 1, \"secret\": \"pull-secret-value\"").unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("not an ibi patch file") && !msg.contains("pull-secret-value"),
            "{msg}"
        );
    }
}
