//! `create config-image`: one site (`--dir`), or every site of an inventory (`--sites`); the work is
//! `config_image::build` and `config_image::batch`, this prints what they did.

use std::path::Path;

use anyhow::{Result, bail};
use tracing::info;

use crate::cli::CreateConfigImageOpts;
use crate::config::ValidationError;
use crate::config_image::batch::{self, Status};
use crate::config_image::build::{SeedOption, build_checked};
use crate::install_image::build::OUTPUT_FILE;
use crate::install_image::one_shot_check;
use crate::util::text::escape_control;

pub fn run(opts: &CreateConfigImageOpts) -> Result<()> {
    let seed = seed_option(opts);
    if let Some(inventory) = &opts.sites {
        return run_batch(&opts.dir.dir, inventory, seed.as_ref());
    }
    let out = build_checked(&opts.dir.dir, opts.rotate_crypto, seed.as_ref())?;
    info!(dir = %opts.dir.dir.display(), identity = ?out.identity, "Config-Image created");
    let dir = &opts.dir.dir;
    one_shot_check::warn_if_mismatched(&dir.join(OUTPUT_FILE), dir, "");
    for p in [&out.iso, &out.kubeconfig, &out.kubeadmin_password] {
        println!("{}", p.display());
    }
    Ok(())
}

/// `--seed` and how to reach it.
fn seed_option(opts: &CreateConfigImageOpts) -> Option<SeedOption> {
    opts.seed.as_ref().map(|reference| SeedOption {
        reference: reference.clone(),
        insecure_registries: opts.insecure_registry.clone(),
    })
}

/// The batch: failing sites on stderr as they are found, the summary table on stdout, exit 1 when a
/// site failed.
fn run_batch(base_dir: &Path, inventory: &Path, seed: Option<&SeedOption>) -> Result<()> {
    let results = batch::build(base_dir, inventory, seed)?;
    let mut failed = 0;
    let mut rows = Vec::with_capacity(results.len());
    for r in &results {
        let status = match &r.outcome {
            Ok(status) => *status,
            Err(e) => {
                failed += 1;
                report_site_error(&r.name, e);
                Status::Failed
            }
        };
        let output = match status {
            Status::Failed => "-".to_string(),
            _ => r.iso.display().to_string(),
        };
        if status != Status::Failed
            && let Some(site) = r.iso.parent()
        {
            let who = format!("site {}: ", escape_control(&r.name));
            one_shot_check::warn_if_mismatched(&site.join(OUTPUT_FILE), site, &who);
        }
        rows.push((r.name.as_str(), status, output));
    }
    print!("{}", summary(&rows));
    if failed > 0 {
        bail!(
            "{failed} of {} sites failed (the others are built)",
            results.len()
        );
    }
    Ok(())
}

/// A failed site on stderr: each finding on its own line (`error: site a19: file: field: message`),
/// anything else with its context chain.
fn report_site_error(name: &str, e: &anyhow::Error) {
    for line in site_error_lines(name, e) {
        eprintln!("{line}");
    }
}

fn site_error_lines(name: &str, e: &anyhow::Error) -> Vec<String> {
    match e.downcast_ref::<ValidationError>() {
        Some(v) => v
            .findings
            .iter()
            .map(|f| format!("error: site {name}: {f}"))
            .collect(),
        None => vec![format!("error: site {name}: {e:#}")],
    }
}

/// The table on stdout: one row per site in inventory order, then the totals.
fn summary(rows: &[(&str, Status, String)]) -> String {
    let width = rows
        .iter()
        .map(|(name, _, _)| name.len())
        .chain(["SITE".len()])
        .max()
        .unwrap_or(0);
    let result_width = "unchanged".len();
    let mut out = format!("{:<width$}  {:<result_width$}  OUTPUT\n", "SITE", "RESULT");
    for (name, status, output) in rows {
        out.push_str(&format!(
            "{name:<width$}  {:<result_width$}  {output}\n",
            status.as_str()
        ));
    }
    let count = |s: Status| rows.iter().filter(|(_, st, _)| *st == s).count();
    out.push_str(&format!(
        "{} sites: {} created, {} updated, {} unchanged, {} failed\n",
        rows.len(),
        count(Status::Created),
        count(Status::Updated),
        count(Status::Unchanged),
        count(Status::Failed)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Finding;

    #[test]
    fn summary_is_aligned_and_totals() {
        let rows = [
            (
                "a17",
                Status::Created,
                "b/sites/a17/imagebasedconfig.iso".to_string(),
            ),
            (
                "a-long-one",
                Status::Unchanged,
                "b/sites/a-long-one/imagebasedconfig.iso".to_string(),
            ),
            ("x", Status::Failed, "-".to_string()),
        ];
        assert_eq!(
            summary(&rows),
            "SITE        RESULT     OUTPUT\n\
             a17         created    b/sites/a17/imagebasedconfig.iso\n\
             a-long-one  unchanged  b/sites/a-long-one/imagebasedconfig.iso\n\
             x           failed     -\n\
             3 sites: 1 created, 0 updated, 1 unchanged, 1 failed\n"
        );
    }

    #[test]
    fn site_errors_are_prefixed_per_finding() {
        let e: anyhow::Error = ValidationError {
            findings: vec![
                Finding {
                    file: "image-based-config.yaml".into(),
                    field: "hostname".into(),
                    message: "bad".into(),
                    line: None,
                },
                Finding {
                    file: "install-config.yaml".into(),
                    field: String::new(),
                    message: "worse".into(),
                    line: None,
                },
            ],
        }
        .into();
        assert_eq!(
            site_error_lines("a19", &e),
            [
                "error: site a19: image-based-config.yaml: hostname: bad",
                "error: site a19: install-config.yaml: worse",
            ]
        );
        let e = anyhow::anyhow!("disk full").context("writing x");
        assert_eq!(
            site_error_lines("a19", &e),
            ["error: site a19: writing x: disk full"]
        );
    }
}
