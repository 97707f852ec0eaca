//! Writing the rendered files: every object checked against the hub's field rules first, then
//! each file atomically, Secrets 0600 in 0700 folders; what was written, with the warnings.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::objects;
use super::plan::{HubOptions, SitePlan, not_carried};
use super::render::{
    CLUSTER_IMAGE_SET_FILE, OutFile, SECRETS_DIR, SHARED_DIR, SITES_DIR, doc_file, kustomizations,
    render_site,
};
use super::rules;
use crate::config::Fleet;
use crate::util::fs::{Clobber, ensure_dir, write_atomic};

const DIR_MODE: u32 = 0o755;

const FILE_MODE: u32 = 0o644;

const SECRET_DIR_MODE: u32 = 0o700;

const SECRET_FILE_MODE: u32 = 0o600;

/// The API server's bound on an object's annotations together (`TotalAnnotationSizeLimitB`):
/// client-side apply's `last-applied-configuration` must fit in it.
const MAX_CLIENT_SIDE_APPLY: usize = 256 * 1024;

/// What was written.
pub struct HubOutput {
    pub out: PathBuf,
    /// Every file, shared ones first, then site by site in inventory order.
    pub files: Vec<PathBuf>,
    pub sites: usize,
    /// Sites `create config-image --sites` has not built: no identity Secrets for them (a hub gives
    /// them a new identity).
    pub unbuilt: Vec<String>,
    /// Folders under `OUT/sites/` (or `OUT/secrets/`) of sites the inventory no longer has (only
    /// looked for without `--only`); left in place.
    pub stale: Vec<PathBuf>,
    /// What a site sets that the hub path does not carry over, and how a file must be applied, a
    /// line each, site first.
    pub warnings: Vec<String>,
}

pub(super) fn write_all(
    o: &HubOptions,
    fleet: &Fleet,
    plans: &[SitePlan<'_>],
    out: &Path,
    release_image: &str,
    image_set: &str,
) -> Result<HubOutput> {
    let mut outs = vec![doc_file(
        out.join(SHARED_DIR).join(CLUSTER_IMAGE_SET_FILE),
        &objects::cluster_image_set(image_set, release_image),
    )?];
    for plan in plans {
        outs.extend(render_site(o, fleet, plan, out, image_set)?);
    }
    // Everything is rendered and checked before the first file is written.
    let kustomize = kustomizations(out, &outs)?;
    for f in &outs {
        let doc: serde_json::Value = serde_yaml_ng::from_str(f.text.expose_str())?;
        let errors = rules::check_object(&doc);
        if !errors.is_empty() {
            bail!(
                "internal error: {} breaks the hub's field rules: {}",
                f.path.display(),
                errors.join("; ")
            );
        }
    }
    let outs: Vec<OutFile> = outs.into_iter().chain(kustomize).collect();
    ensure_dir(&out.join(SECRETS_DIR), SECRET_DIR_MODE)?;
    let mut files = Vec::new();
    let mut big = Vec::new();
    for f in outs {
        // Client-side apply keeps the whole object in an annotation, and annotations are bounded.
        let len = f.text.expose_str().len();
        if len > MAX_CLIENT_SIDE_APPLY {
            big.push(format!(
                "{}: {len} bytes: a client-side `kubectl apply` stores the whole object in its last-applied annotation, which the API server bounds at {MAX_CLIENT_SIDE_APPLY} bytes; apply it with `kubectl apply --server-side` (Argo CD: ServerSideApply=true)",
                f.path.display()
            ));
        }
        let (dir_mode, file_mode) = if f.secret {
            (SECRET_DIR_MODE, SECRET_FILE_MODE)
        } else {
            (DIR_MODE, FILE_MODE)
        };
        if let Some(parent) = f.path.parent() {
            ensure_dir(parent, dir_mode)?;
        }
        write_atomic(
            &f.path,
            f.text.expose_str().as_bytes(),
            file_mode,
            Clobber::Replace,
        )?;
        files.push(f.path);
    }
    Ok(HubOutput {
        out: out.to_path_buf(),
        files,
        warnings: plans
            .iter()
            .filter(|p| !p.adopt)
            .flat_map(|p| not_carried(p, release_image))
            .chain(big)
            .collect(),
        sites: plans.len(),
        unbuilt: plans
            .iter()
            .filter(|p| p.identity.is_none())
            .map(|p| p.site.name.clone())
            .collect(),
        stale: if o.only.is_empty() {
            stale_folders(out, fleet)
        } else {
            Vec::new()
        },
    })
}

/// Site folders in OUT of sites not in the inventory.
fn stale_folders(out: &Path, fleet: &Fleet) -> Vec<PathBuf> {
    let mut stale = Vec::new();
    for dir in [SITES_DIR, SECRETS_DIR] {
        let Ok(entries) = std::fs::read_dir(out.join(dir)) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter(|e| {
                let name = e.file_name();
                !fleet.sites.iter().any(|s| name == s.name.as_str())
            })
            .map(|e| e.path())
            .collect();
        found.sort();
        stale.extend(found);
    }
    stale
}
