//! What deploy checks before the first power or media change, for every selected site at once, so a
//! mistake is found before any host is touched and all of them in one run: the inventory (already
//! decoded strictly by `plan`), each site's credential file or variable and CA file, the site's
//! record, each BMC reached with a read-only job (login, the System, its virtual CD), and for the
//! factory the installation ISO's `statusURL` (it must name the address deploy serves at) and
//! `statusCA` (it must verify deploy's certificate). `ibi deploy --check` runs only this.

use std::fs::File;
use std::sync::mpsc::channel;

use anyhow::Result;
use reqwest::Url;

use super::plan::{self, DeployOptions, HostSignals, Planned, Target};
use super::pool::Pool;
use super::record::Record;
use super::step::Resume;
use crate::config_image::build::{AUTH_DIR, KUBECONFIG_FILE};
use crate::contract::config_iso::ISO_FILE_NAME;
use crate::deliver::boot::{self, BootRequest, Job};
use crate::deliver::deploy_state::Phase;
use crate::deliver::serve::catalog::installation_source;
use crate::deliver::serve::tls::{CERT_FILE, Host, verify_for};
use crate::deliver::serve::{Source, TlsChoice, public_base};
use crate::install_image::build::OUTPUT_FILE;
use crate::install_image::one_shot_check;
use crate::install_image::per_host;
use crate::install_image::variant::load_recipe;
use crate::redfish::system::Patience;
use crate::util::text::escape_control;

/// One thing to fix; `site` is `-` for what the whole fleet shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub site: String,
    pub check: &'static str,
    pub detail: String,
}

/// What the check found of one site's BMC when it was reached.
#[derive(Debug, Clone)]
pub struct Reached {
    pub site: String,
    pub system: String,
}

#[derive(Debug, Default)]
pub struct Checked {
    pub findings: Vec<Finding>,
    pub reached: Vec<Reached>,
    /// Sites done by an earlier run: deploy leaves them alone, so their BMCs are not asked.
    pub done: Vec<String>,
}

impl Checked {
    /// Whether the run would do nothing: every selected site is done and nothing is wrong.
    pub fn nothing_to_do(&self) -> bool {
        self.findings.is_empty() && self.reached.is_empty()
    }

    /// The findings as a table (SITE, CHECK, FINDING), or the sites found ready and those done.
    pub fn table(&self) -> String {
        let rows: Vec<[String; 3]> = if self.findings.is_empty() {
            let mut rows: Vec<[String; 3]> = self
                .reached
                .iter()
                .map(|r| {
                    [
                        r.site.clone(),
                        "ok".into(),
                        format!("BMC login, System {} and its virtual CD", r.system),
                    ]
                })
                .collect();
            rows.extend(self.done.iter().map(|site| {
                [
                    site.clone(),
                    "done".into(),
                    format!("done by an earlier run: deploy leaves it alone (--redo {site} does it again)"),
                ]
            }));
            rows.sort_by(|a, b| a[0].cmp(&b[0]));
            rows
        } else {
            self.findings
                .iter()
                .map(|f| [f.site.clone(), f.check.into(), f.detail.clone()])
                .collect()
        };
        let head = ["SITE", "CHECK", "FINDING"].map(String::from);
        let w0 = rows
            .iter()
            .chain([&head])
            .map(|r| r[0].chars().count())
            .max();
        let w1 = rows
            .iter()
            .chain([&head])
            .map(|r| r[1].chars().count())
            .max();
        let (w0, w1) = (w0.unwrap_or(4), w1.unwrap_or(5));
        std::iter::once(&head)
            .chain(&rows)
            .map(|r| {
                format!(
                    "{:<w0$}  {:<w1$}  {}\n",
                    escape_control(&r[0]),
                    r[1],
                    escape_control(&r[2])
                )
            })
            .collect()
    }
}

/// Every check, for every target; never changes anything on a host. `planned` carries what the
/// inventory's decoding found: those sites are reported with everything else, not checked further.
pub fn check(o: &DeployOptions, planned: &Planned, signals: HostSignals) -> Result<Checked> {
    let mut out = Checked::default();
    let fleet = |check: &'static str, detail: String| Finding {
        site: "-".into(),
        check,
        detail,
    };
    out.findings.extend(
        planned
            .fleet_findings
            .iter()
            .map(|f| fleet("inventory", f.clone())),
    );
    // Where BMCs will fetch from: the server refuses at once what it cannot tell them.
    let plain = matches!(o.tls, TlsChoice::Plain);
    match public_base(o.public_url.as_ref(), o.listen, plain) {
        Err(e) => out.findings.push(fleet("serve", format!("{e:#}"))),
        Ok(served) if matches!(o.phase, Phase::Factory | Phase::Oneshot) && signals.reports => {
            out.findings.extend(status_url(o, &served));
        }
        Ok(_) => {}
    }
    let mut touched = Vec::new();
    for t in &planned.targets {
        if !t.inventory.is_empty() {
            out.findings.extend(t.inventory.iter().map(|f| Finding {
                site: t.name.clone(),
                check: "inventory",
                detail: f.clone(),
            }));
            continue;
        }
        let redo = o.redo.contains(&t.name);
        match Record::open(&o.base, &t.name, o.phase, &t.address) {
            // Done earlier: this run leaves the host alone, so its BMC is not asked anything.
            Ok(r) if !redo && r.resume(false) == Resume::Done => {
                out.done.push(t.name.clone());
                continue;
            }
            Ok(r) if !redo => out.findings.extend(other_way(o.phase, t, &r)),
            Ok(_) => {}
            Err(_) if redo => {}
            Err(e) => out.findings.push(Finding {
                site: t.name.clone(),
                check: "record",
                detail: format!(
                    "{e:#}; deploy cannot tell what was done to this host: check it, then pass --redo {} to start the site over",
                    t.name
                ),
            }),
        }
        if matches!(o.phase, Phase::Site | Phase::Oneshot) {
            out.findings.extend(site_files(t));
        }
        // A one-shot ISO written for the site that no longer matches it: hosts booted from it by
        // hand get an older configuration (deploy's own one-shot variants are made anew).
        let who = format!("site {}: ", escape_control(&t.name));
        one_shot_check::warn_if_mismatched(&t.dir.join(OUTPUT_FILE), &t.dir, &who);
        if let Err(e) = &t.bmc {
            out.findings.push(Finding {
                site: t.name.clone(),
                check: "inventory",
                detail: e.clone(),
            });
        }
        touched.push(t);
    }
    if o.phase == Phase::Oneshot {
        // The variants of sites already built; deploy builds the others, then checks them alike.
        for (site, detail) in plan::oneshot_failures(&o.base, &touched)? {
            out.findings.push(Finding {
                site,
                check: "oneshot",
                detail,
            });
        }
    }
    reach_bmcs(o, &touched, &mut out)?;
    out.findings.sort_by(|a, b| a.site.cmp(&b.site));
    Ok(out)
}

/// Each BMC, `--parallel` at a time: logged in, its System and virtual CD found, nothing changed.
fn reach_bmcs(o: &DeployOptions, targets: &[&Target], out: &mut Checked) -> Result<()> {
    let mut pool = Pool::new(o.parallel, "ibi-check")?;
    let (tx, rx) = channel();
    let mut todo = targets
        .iter()
        .filter_map(|t| t.bmc.as_ref().ok().map(|b| (t.name.clone(), b.clone())));
    let mut waiting = 0;
    loop {
        while pool.has_room() {
            let Some((site, bmc)) = todo.next() else {
                break;
            };
            let req = BootRequest {
                bmc: bmc.url.clone(),
                system_id: bmc.system.clone(),
                client: bmc.client.clone(),
                job: Job::Check,
                timeout: o.timeouts.bmc,
                patience: Patience::default(),
            };
            let (tx, tx_panic, name) = (tx.clone(), tx.clone(), site.clone());
            pool.run(
                move || {
                    let _ = tx.send((site, boot::run(&req)));
                },
                move |m| {
                    let e = anyhow::anyhow!(
                        "ibi's BMC check panicked ({}): a bug in ibi; nothing was changed on the host",
                        crate::util::text::clip(&m, 400)
                    );
                    let _ = tx_panic.send((name, Err(e)));
                },
            );
            waiting += 1;
        }
        if waiting == 0 {
            break;
        }
        let Ok((site, result)) = rx.recv() else { break };
        pool.done();
        waiting -= 1;
        match result {
            Ok(r) => out.reached.push(Reached {
                site,
                system: r.system,
            }),
            Err(e) => out.findings.push(Finding {
                site,
                check: "bmc",
                detail: format!("{e:#}"),
            }),
        }
    }
    pool.close();
    out.reached.sort_by(|a, b| a.site.cmp(&b.site));
    Ok(())
}

/// A site installed the other way: one-shot after the two phases (or the reverse) would install or
/// reconfigure the host again, so it takes `--redo`.
fn other_way(phase: Phase, t: &Target, r: &Record) -> Option<Finding> {
    let done: Vec<&str> = r
        .state
        .live_phases()
        .filter(|(p, _)| (*p == Phase::Oneshot) != (phase == Phase::Oneshot))
        .map(|(p, _)| p.name())
        .collect();
    if done.is_empty() {
        return None;
    }
    let what = match phase {
        Phase::Oneshot => "a one-shot install would install the host again",
        Phase::Factory => "the factory phase would install the host again",
        Phase::Site => "its one-shot install carried its configuration already",
    };
    Some(Finding {
        site: t.name.clone(),
        check: "record",
        detail: format!(
            "deploy ran its {} phase before: {what}; pass --redo {} to do it anyway",
            done.join(" and "),
            t.name
        ),
    })
}

/// The site phase watches the cluster with the site's own kubeconfig, built with its ISO.
fn site_files(t: &Target) -> Vec<Finding> {
    let iso = t.dir.join(ISO_FILE_NAME);
    let kubeconfig = t.dir.join(AUTH_DIR).join(KUBECONFIG_FILE);
    if iso.is_file() && !kubeconfig.is_file() {
        return vec![Finding {
            site: t.name.clone(),
            check: "site",
            detail: format!(
                "{} is missing: deploy watches the cluster with it (build the site again with ibi create config-image)",
                kubeconfig.display()
            ),
        }];
    }
    Vec::new()
}

/// The installation ISO's report settings against the server deploy is about to run, which BMCs
/// and hosts reach at `served`.
fn status_url(o: &DeployOptions, served: &Url) -> Vec<Finding> {
    let finding = |detail: String| {
        vec![Finding {
            site: "-".into(),
            check: "statusURL",
            detail,
        }]
    };
    let settings = match installation_settings(o) {
        Ok(Some(s)) => s,
        Ok(None) => return Vec::new(),
        Err(e) => return finding(format!("reading the installation ISO: {e:#}")),
    };
    let plain = matches!(o.tls, TlsChoice::Plain);
    let Ok(reported) = Url::parse(&settings.url) else {
        return finding(format!(
            "the installation ISO's statusURL {:?} is not a URL",
            settings.url
        ));
    };
    let origin = |u: &Url| {
        (
            u.scheme().to_string(),
            u.host_str().map(str::to_ascii_lowercase),
            u.port_or_known_default(),
        )
    };
    if origin(&reported) != origin(served) {
        return finding(format!(
            "the installation ISO reports to {} but deploy serves at {}: the hosts' reports would not reach it; rebuild the ISO with statusURL: {} (ibi create image), or pass --listen/--public-url to match it",
            reported.origin().ascii_serialization(),
            served.origin().ascii_serialization(),
            served.origin().ascii_serialization()
        ));
    }
    if plain {
        return Vec::new();
    }
    let host = Host::parse(reported.host_str().unwrap_or_default());
    let chain = match &o.tls {
        TlsChoice::Files { cert, .. } => {
            std::fs::read(cert).map_err(|e| format!("reading --tls-cert {}: {e}", cert.display()))
        }
        TlsChoice::SelfSigned => {
            let path = o.base.join(CERT_FILE);
            std::fs::read(&path).map_err(|_| {
                format!(
                    "deploy would make its own certificate ({}) now, and the ISO's statusCA cannot name a certificate made after it: pass --tls-cert/--tls-key from the CA statusCA names, or run `ibi serve --dir {}` once and rebuild with statusCA: {}",
                    path.display(),
                    o.base.display(),
                    path.display()
                )
            })
        }
        TlsChoice::Plain => return Vec::new(),
    };
    let verdict = chain
        .and_then(|c| verify_for(&c, settings.ca_pem.as_deref(), &host).map_err(|e| e.to_string()));
    match verdict {
        Ok(()) => Vec::new(),
        Err(e) => finding(format!(
            "the hosts would not trust deploy's certificate for {}: {e} ({}); rebuild the ISO with the statusCA that signed deploy's certificate, or serve with one that statusCA signed",
            reported.origin().ascii_serialization(),
            match settings.ca_pem {
                Some(_) => "checked against the ISO's statusCA",
                None => "no statusCA: checked against this machine's system trust store",
            }
        )),
    }
}

/// The report settings of the installation ISO deploy serves (the one `ibi serve` would pick).
fn installation_settings(
    o: &DeployOptions,
) -> Result<Option<crate::contract::host_report::ReportConfig>> {
    let embedded = match installation_source(&o.base)? {
        None => return Ok(None),
        Some(Source::Variant(recipe)) => {
            let r = load_recipe(&recipe)?;
            per_host::read(&File::open(&r.base.path)?, &r.patches)?
        }
        Some(src) => per_host::read(&File::open(src.path())?, &[])?,
    };
    embedded.report_config()
}
