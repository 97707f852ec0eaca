//! `ibi agent install`: the steps of lca-cli ibi through the state runner, the take-over of a killed run, and where the state is.

use super::host_unit::install_host_unit;
use super::targets::{Layout, Targets};
use std::cell::RefCell;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use tracing::{info, warn};

use super::restore::RestorePaths;
use super::site_config::SiteSource;
use crate::cmd;
use crate::disk::mounts::ensure_unused;
use crate::disk::{
    PartitionDevice, add_partition, find_partition, find_partition_by_label, grow_partition,
    grow_partition_to_end, mkfs_xfs,
};
use crate::ostree_restore::{deployment_of, undeploy_other};
use crate::precache::{
    PrecacheOptions, SkopeoPuller, Storage, image_list, insecure_hosts_from_registries_conf,
    load_registries_conf, precache, registry_sources_from_registries_conf, should_override,
};
use crate::prepare_config::{PrepareConfig, load_prepare_config};
use crate::report::{Delivery, Reporter, ReporterSetup};
use crate::seed_fetch::SeedSource;
use crate::state::{Progress, Runner, StateError, StateFile, Step, StepFn, step};
use contract::host_report::{IBI_INSTALL_UNIT, REPORT_CONFIG_PATH};

/// Inside the containers mount: the state directory that travels with the target disk.
const STATE_DIR: &str = ".ibi";
const STATE_FILE: &str = "install-state.json";
/// The seed's small documents, inside [`STATE_DIR`].
const DOCS_DIR: &str = "seed";
const STATE_DIR_MODE: u32 = 0o700;

/// Everything `ibi agent install` takes besides the configuration file's contents.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// ibi-configuration.json.
    pub config: PathBuf,
    /// Base of the live system's relative paths (`var/tmp/pull-secret.json`, `var/tmp/post.sh`).
    pub root: PathBuf,
    pub sysroot_mount: PathBuf,
    pub containers_mount: PathBuf,
    pub state_file: PathBuf,
    pub status_file: PathBuf,
    pub registries_conf: PathBuf,
    /// The pull secret; `None` means `<root>/var/tmp/pull-secret.json` when it exists.
    pub authfile: Option<PathBuf>,
    pub coreos_installer: String,
    pub storage_driver: String,
    /// The ibi binary placed on the host.
    pub binary: PathBuf,
    /// The report settings (`statusURL`); `None` means `<root>/var/tmp/ibi-report.json`. No file there:
    /// no reports.
    pub report_config: Option<PathBuf>,
    /// Ignore recorded state and start with the disk wipe.
    pub fresh: bool,
}

impl InstallOptions {
    /// The live ISO's defaults.
    pub fn new(config: impl Into<PathBuf>) -> InstallOptions {
        InstallOptions {
            config: config.into(),
            root: PathBuf::from("/"),
            sysroot_mount: PathBuf::from("/mnt"),
            containers_mount: PathBuf::from("/var/lib/containers"),
            state_file: PathBuf::from("/var/tmp/ibi-install-state.json"),
            status_file: PathBuf::from(contract::agent_status::DEFAULT_STATUS_PATH),
            registries_conf: PathBuf::from(crate::precache::REGISTRIES_CONF),
            authfile: None,
            coreos_installer: "coreos-installer".to_string(),
            storage_driver: "overlay".to_string(),
            binary: PathBuf::from("/proc/self/exe"),
            report_config: None,
            fresh: false,
        }
    }
}

/// What the install reads from the live system's registries.conf.
struct Registries {
    insecure: Vec<String>,
    mirror_sources: Vec<String>,
}

/// One install: its inputs and the targets once mounted.
struct Install<'a> {
    opts: &'a InstallOptions,
    cfg: PrepareConfig,
    layout: Layout,
    registries: Registries,
    authfile: Option<PathBuf>,
    /// A one-shot ISO's site configuration on the live system.
    site: Option<SiteSource>,
    targets: RefCell<Option<Targets>>,
    reporter: Option<&'a Reporter>,
}

/// Runs the install; see the module comment. With report settings, every step change goes to
/// `ibi serve`, and the result too: before the shutdown step on success, with the journal's tail on
/// failure.
pub fn install(opts: &InstallOptions) -> Result<()> {
    let progress = Progress::new(&opts.status_file);
    let setup = report_setup(opts);
    let reporter = match setup.start() {
        Ok(r) => r.map(Arc::new),
        Err(e) => {
            warn!(target: "ibi::agent::install::run", "not reporting to ibi serve: {e:#}");
            None
        }
    };
    if let Some(r) = &reporter {
        progress.observe(r.observer());
    }
    let result = install_with(opts, progress.clone(), reporter.as_deref());
    if let (Err(e), Some(r)) = (&result, &reporter) {
        let error = format!("{e:#}");
        log_delivery(r.finish(progress.snapshot(), Err(&error), setup.journal()));
    }
    result
}

/// Where reporting finds its settings, the host's identity, the pull secret and the journal.
fn report_setup(opts: &InstallOptions) -> ReporterSetup {
    ReporterSetup {
        config_file: opts
            .report_config
            .clone()
            .unwrap_or_else(|| opts.root.join(REPORT_CONFIG_PATH.trim_start_matches('/'))),
        root: opts.root.clone(),
        authfile: opts
            .authfile
            .clone()
            .or_else(|| Some(opts.root.join("var/tmp/pull-secret.json"))),
        journalctl: "journalctl".into(),
        unit: IBI_INSTALL_UNIT.into(),
    }
}

fn log_delivery(d: Delivery) {
    match d {
        Delivery::Delivered => info!(target: "ibi::agent::install::run", "final report delivered"),
        Delivery::Refused(code) => {
            warn!(target: "ibi::agent::install::run", "final report refused (HTTP {code})")
        }
        Delivery::GaveUp => {
            warn!(target: "ibi::agent::install::run",
                "final report not delivered: the server stayed unreachable")
        }
    }
}

fn install_with(
    opts: &InstallOptions,
    progress: Progress,
    reporter: Option<&Reporter>,
) -> Result<()> {
    let (cfg, fingerprint) = load_prepare_config(&opts.config)?;
    // A one-shot ISO whose site configuration is missing fails here, before the disk is touched.
    let site = super::site_config::site_source(&opts.root)?;
    let disk = fs::canonicalize(&cfg.installation_disk)
        .with_context(|| format!("installationDisk {}", cfg.installation_disk))?;
    let layout = Layout {
        disk,
        sysroot: opts.sysroot_mount.clone(),
        containers: opts.containers_mount.clone(),
        extra_label: (!cfg.use_containers_folder).then(|| cfg.extra_partition_label.clone()),
    };
    let conf = load_registries_conf(&opts.registries_conf)?;
    let registries = Registries {
        insecure: insecure_hosts_from_registries_conf(&conf),
        mirror_sources: registry_sources_from_registries_conf(&conf),
    };
    let authfile = resolve_authfile(opts)?;
    let _lock = lock_install(&opts.state_file)?;
    // Whatever an earlier, killed run left mounted comes down before anything looks at the disk.
    super::targets::release_stale(&layout)?;
    let state = resolve_state(opts, &layout, fingerprint)?;
    let mut runner = Runner::new(state, progress);
    let job = Install {
        opts,
        cfg,
        layout,
        registries,
        authfile,
        site,
        targets: RefCell::new(None),
        reporter,
    };
    if runner.state().is_finished() {
        info!(target: "ibi::agent::install::run",
            "the install finished in an earlier run; nothing to do (`--fresh` installs again, wiping {})",
            job.layout.disk.display()
        );
        job.report_done(runner.progress());
        return runner.run(job.end_phase());
    }
    let result = job.run(&mut runner);
    if result.is_err()
        && let Some(t) = job.targets.borrow_mut().take()
        && let Err(e) = t.unmount()
    {
        warn!(target: "ibi::agent::install::run",
            "after the failure, unmounting the targets: {e:#}");
    }
    result
}

/// Takes the install lock beside the state file for as long as the returned file is open. Two runs at
/// once would take each other's mounts down; the lock goes with the process, so a killed run never holds
/// it.
fn lock_install(state_file: &Path) -> Result<fs::File> {
    let path = state_file.with_extension("lock");
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
        |e| {
            anyhow::anyhow!(
                "another `ibi agent install` holds {} ({e}); wait for it to end",
                path.display()
            )
        },
    )?;
    Ok(file)
}

impl Install<'_> {
    fn run(&self, runner: &mut Runner) -> Result<()> {
        runner.run(self.disk_phase())?;
        if self.targets.borrow().is_none() {
            // Mounting re-runs on resume, so the targets are always mounted here; be explicit anyway.
            bail!("internal error: the targets are not mounted after the disk phase");
        }
        let state_dir = self.state_dir();
        util::fs::ensure_dir(&state_dir, STATE_DIR_MODE)?;
        runner
            .state_mut()
            .relocate(&state_dir.join(STATE_FILE))
            .context("moving the install state onto the target disk")?;
        let progress = runner.progress().clone();
        runner.run(self.restore_phase(&progress))?;
        runner
            .state_mut()
            .relocate(&self.opts.state_file)
            .context("moving the install state back to the live system")?;
        fs::remove_dir_all(&state_dir)
            .with_context(|| format!("removing {}", state_dir.display()))?;
        if let Some(t) = self.targets.borrow_mut().take() {
            t.unmount()?;
        }
        runner.state_mut().mark_finished()?;
        info!(target: "ibi::agent::install::run", "installation finished");
        self.report_done(runner.progress());
        runner.run(self.end_phase())
    }

    /// The success report goes before the shutdown step: a powered-off host reports nothing.
    fn report_done(&self, progress: &Progress) {
        if let Some(r) = self.reporter {
            log_delivery(r.finish(progress.snapshot(), Ok(()), Vec::new()));
        }
    }

    fn state_dir(&self) -> PathBuf {
        self.layout.containers.join(STATE_DIR)
    }

    fn restore_paths(&self) -> RestorePaths {
        RestorePaths {
            sysroot: self.layout.sysroot.clone(),
            docs: self.state_dir().join(DOCS_DIR),
        }
    }

    fn disk_phase(&self) -> Vec<(Step, StepFn<'_>)> {
        let cfg = &self.cfg;
        let disk = &self.layout.disk;
        let mut plan = Vec::new();
        if !cfg.skip_disk_cleanup {
            plan.push(step(Step::DiskCleanup, move || {
                ensure_unused(disk, "wipe")?;
                super::cleanup::cleanup_disk(disk);
                Ok(())
            }));
        }
        plan.push(step(Step::WriteRhcos, move || {
            ensure_unused(disk, "write RHCOS to")?;
            self.write_rhcos()
        }));
        if !cfg.use_containers_folder {
            plan.push(step(Step::CreateExtraPartition, move || {
                ensure_unused(disk, "repartition")?;
                let part = add_partition(
                    disk,
                    cfg.extra_partition_number,
                    &cfg.extra_partition_label,
                    cfg.partition_start()?,
                )?;
                info!(target: "ibi::agent::install::run", "extra partition: {part}");
                Ok(())
            }));
            plan.push(step(Step::MkfsExtraPartition, move || {
                ensure_unused(disk, "format a partition of")?;
                let part = find_partition(disk, cfg.extra_partition_number)?;
                let dev = PartitionDevice::open(disk, &part)?;
                mkfs_xfs(dev.path(), None)?;
                dev.close()
            }));
        }
        plan.push(step(Step::GrowRoot, move || {
            ensure_unused(disk, "repartition")?;
            self.grow_root()
        }));
        plan.push(step(Step::MountTargets, move || {
            let old = self.targets.borrow_mut().take();
            if let Some(t) = old {
                t.unmount()?;
            }
            *self.targets.borrow_mut() = Some(Targets::mount(&self.layout)?);
            Ok(())
        }));
        plan
    }

    fn restore_phase<'s>(&'s self, progress: &'s Progress) -> Vec<(Step, StepFn<'s>)> {
        let cfg = &self.cfg;
        let stateroot = cfg.stateroot();
        let paths = self.restore_paths();
        let mut plan = Vec::new();
        {
            let (paths, stateroot) = (paths.clone(), stateroot.clone());
            plan.push(step(Step::FetchSeed, move || {
                super::restore::fetch_seed(
                    &self.seed_source()?,
                    &cfg.seed_version,
                    &stateroot,
                    &paths,
                    progress,
                )
            }));
        }
        {
            let (paths, stateroot) = (paths.clone(), stateroot.clone());
            plan.push(step(Step::Deploy, move || {
                super::restore::deploy(&paths, &stateroot)
            }));
        }
        {
            let (paths, stateroot) = (paths.clone(), stateroot.clone());
            plan.push(step(Step::RestoreEtc, move || {
                super::restore::restore_etc_step(&paths, &stateroot)
            }));
        }
        if !cfg.precache_disabled {
            let paths = paths.clone();
            plan.push(step(Step::Precache, move || {
                self.precache(&paths, progress)
            }));
        }
        let stateroot_dir = self.layout.sysroot.join("ostree/deploy").join(&stateroot);
        match self.site.clone() {
            None => {}
            Some(SiteSource::Tree(src)) => {
                plan.push(step(Step::WriteSiteConfig, move || {
                    super::site_config::write_site_config(&src, &stateroot_dir)
                }));
            }
            Some(SiteSource::Fetch(fetch)) => {
                let report_config = report_setup(self.opts).config_file;
                plan.push(step(Step::WriteSiteConfig, move || {
                    super::site_config::fetch_site_config(
                        &self.opts.root,
                        &fetch,
                        &report_config,
                        &stateroot_dir,
                    )
                }));
            }
        }
        plan.push(step(Step::PostScript, move || self.post_script()));
        {
            let stateroot = stateroot.clone();
            plan.push(step(Step::UndeployRhcos, move || {
                let removed = undeploy_other(&self.layout.sysroot, &stateroot)?;
                info!(target: "ibi::agent::install::run",
                    removed = ?removed, "RHCOS deployment removed");
                Ok(())
            }));
        }
        plan.push(step(Step::InstallHostUnit, move || {
            let deployed = deployment_of(&self.layout.sysroot, &stateroot)?;
            let stateroot_dir = self.layout.sysroot.join("ostree/deploy").join(&stateroot);
            install_host_unit(&deployed.deploy_dir, &stateroot_dir, &self.opts.binary)
        }));
        plan
    }

    fn end_phase(&self) -> Vec<(Step, StepFn<'_>)> {
        if !self.cfg.shutdown {
            info!(target: "ibi::agent::install::run", "Skipping shutdown");
            return Vec::new();
        }
        vec![step(Step::Shutdown, || {
            cmd::run(&cmd::argv("shutdown", &["now"])).map(drop)
        })]
    }

    /// `coreos-installer install <disk> <coreosInstallerArgs…>`: RHCOS from the live ISO's own image.
    fn write_rhcos(&self) -> Result<()> {
        let mut args: Vec<OsString> = vec!["install".into(), self.layout.disk.clone().into()];
        args.extend(self.cfg.coreos_installer_args.iter().map(OsString::from));
        let argv = cmd::argv(&self.opts.coreos_installer, &args);
        cmd::run(&argv)
            .map(drop)
            .context("writing RHCOS to the disk")
    }

    /// Root (partition `root`) grows up to the extra partition, or to the end of the disk.
    fn grow_root(&self) -> Result<()> {
        let disk = &self.layout.disk;
        let root = find_partition_by_label(disk, super::targets::ROOT_LABEL)?;
        let grown = match self.layout.extra_label {
            Some(_) => {
                let extra = find_partition(disk, self.cfg.extra_partition_number)?;
                grow_partition(disk, root.number, extra.first_lba - 1)?
            }
            None => grow_partition_to_end(disk, root.number)?,
        };
        info!(target: "ibi::agent::install::run", "root partition: {grown}");
        Ok(())
    }

    fn seed_source(&self) -> Result<SeedSource> {
        let mut source = SeedSource::parse(&self.cfg.seed_image)
            .with_context(|| format!("seedImage {:?}", self.cfg.seed_image))?
            .with_insecure_registries(self.registries.insecure.iter().cloned());
        if let Some(auth) = &self.authfile {
            source = source.with_authfile(auth);
        }
        Ok(source)
    }

    fn precache(&self, paths: &RestorePaths, progress: &Progress) -> Result<()> {
        let (list, seed_registry, seed_mirrored) = super::restore::precache_inputs(paths)?;
        let rewrite = should_override(
            &seed_registry,
            seed_mirrored,
            &self.registries.mirror_sources,
        );
        let images = image_list(&list, &seed_registry, &self.cfg.release_registry, rewrite);
        let runroot = tempfile::Builder::new()
            .prefix("ibi-containers-run")
            .tempdir()
            .context("creating the container storage's run directory")?;
        let storage = Storage {
            driver: self.opts.storage_driver.clone(),
            graphroot: self.layout.containers.join("storage"),
            runroot: runroot.path().to_path_buf(),
        };
        let puller = SkopeoPuller::new(
            self.authfile.as_deref(),
            storage,
            self.registries.insecure.clone(),
        );
        let options = PrecacheOptions {
            best_effort: self.cfg.precache_best_effort,
            ..PrecacheOptions::default()
        };
        let report = precache(&images, &puller, &options, progress)?;
        info!(target: "ibi::agent::install::run",
            pulled = report.pulled,
            failed = report.failed.len(),
            total = report.total,
            "precache done"
        );
        Ok(())
    }

    /// `var/tmp/post.sh` under the root, when present; it must be executable, as for lca-cli.
    fn post_script(&self) -> Result<()> {
        let script = self.opts.root.join("var/tmp/post.sh");
        if !script.exists() {
            info!(target: "ibi::agent::install::run", "no {}; nothing to run", script.display());
            return Ok(());
        }
        let out = cmd::run(&[script.clone().into_os_string()])
            .with_context(|| format!("running {}", script.display()))?;
        for line in out.lines() {
            info!(target: "post.sh", "{line}");
        }
        Ok(())
    }
}

/// `--authfile`, or the live ISO's pull secret when Ignition wrote one.
fn resolve_authfile(opts: &InstallOptions) -> Result<Option<PathBuf>> {
    if let Some(path) = &opts.authfile {
        fs::metadata(path).with_context(|| format!("--authfile {}", path.display()))?;
        return Ok(Some(path.clone()));
    }
    let default = opts.root.join("var/tmp/pull-secret.json");
    Ok(default.exists().then_some(default))
}

/// The state to run with: `--fresh` starts over; a state in `/var/tmp` (this boot) is used as is;
/// otherwise one left on the disk by an interrupted install is resumed when it has the same
/// configuration. A disk holding another configuration's interrupted install, or one whose volume could
/// not be read, stops the run: it is never wiped without `--fresh`.
fn resolve_state(
    opts: &InstallOptions,
    layout: &Layout,
    fingerprint: crate::prepare_config::ConfigFingerprint,
) -> Result<StateFile> {
    let local = &opts.state_file;
    if opts.fresh {
        remove_if_present(local)?;
        info!(target: "ibi::agent::install::run", "--fresh: starting over from the disk wipe");
        return StateFile::load_or_new(local, fingerprint);
    }
    if local.exists() {
        let state = StateFile::load_or_new(local, fingerprint.clone())?;
        if state.done_steps().next().is_some() || state.is_finished() {
            return Ok(state);
        }
        // Nothing done here (a run refused before its first step, a `--fresh` that found the disk in
        // use): it says nothing about the disk, which may hold an interrupted install to resume.
        remove_if_present(local)?;
    }
    let rel = Path::new(STATE_DIR).join(STATE_FILE);
    let Some(bytes) = super::targets::find_state_on_disk(layout, &rel)? else {
        return StateFile::load_or_new(local, fingerprint);
    };
    info!(target: "ibi::agent::install::run",
        disk = %layout.disk.display(), "found the state of an interrupted install on the disk");
    util::fs::write_atomic(local, &bytes, 0o600, util::fs::Clobber::Replace)?;
    match StateFile::load_or_new(local, fingerprint) {
        Ok(state) => Ok(state),
        Err(e) => {
            remove_if_present(local)?;
            match e.downcast_ref::<StateError>() {
                Some(StateError::FingerprintMismatch { recorded, .. }) => bail!(
                    "{} holds an interrupted install of another ibi-configuration (sha256 {recorded}); \
                     refusing to wipe it. Run with that configuration to resume it, or with `--fresh` \
                     to start over",
                    layout.disk.display()
                ),
                _ => Err(e.context(format!(
                    "reading the interrupted install's state on {} (`--fresh` starts over)",
                    layout.disk.display()
                ))),
            }
        }
    }
}

fn remove_if_present(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}
