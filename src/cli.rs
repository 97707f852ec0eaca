//! The command line, declared in one place. Names mirror the command path
//! (`create config-image` → [`CreateConfigImageOpts`]) and the shape follows
//! `openshift-install image-based create …` so operators can switch tools without relearning.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Image-based installation of single-node OpenShift.
#[derive(Debug, Parser)]
#[command(name = "ibi", version, about, propagate_version = true)]
pub struct Cli {
    /// Log level for messages on stderr: error, warn, info, debug or trace. `RUST_LOG` overrides it.
    #[arg(long, global = true, default_value = "warn", value_name = "LEVEL",
          value_parser = crate::util::logging::LEVELS)]
    pub log_level: String,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create templates and images
    #[command(subcommand)]
    Create(CreateCommand),
    /// Say what an ISO is (installation, configuration, plain CoreOS, other) and what it carries
    Inspect(InspectOpts),
    /// Host-side work on the live ISO and the installed host (feature `agent`)
    #[cfg(feature = "agent")]
    #[command(subcommand)]
    Agent(AgentCommand),
    /// Serve the ISOs under DIR to BMCs, each under an unguessable URL (HTTPS by default)
    Serve(ServeOpts),
    /// Boot a host through its Redfish BMC from a served ISO (factory: --boot cd; site: --boot disk)
    Boot(BootOpts),
    /// Follow a site's cluster with its own admin kubeconfig until it is ready (exit 0), or the
    /// timeout (exit 2)
    Watch(WatchOpts),
    /// Deploy one phase to every site of an inventory: serve, boot through each BMC, hear back,
    /// eject (a re-run skips what is done and resumes what is not)
    Deploy(DeployOpts),
    /// Show the fleet: each host's phase, step and state from its reports to `ibi serve` and deploy's record
    Status(StatusOpts),
    /// Print a shell completion script to stdout
    Completion(CompletionOpts),
}

#[derive(Debug, Subcommand)]
pub enum CreateCommand {
    /// Write a commented image-based-config.yaml template (per-site settings)
    ConfigTemplate(CreateConfigTemplateOpts),
    /// Build imagebasedconfig.iso, auth/kubeconfig and auth/kubeadmin-password for one site (or, with
    /// --sites, for every site of an inventory)
    ConfigImage(CreateConfigImageOpts),
    /// Write the manifests a hub (SiteConfig + image-based-install-operator) needs for every site of
    /// an inventory, in a GitOps layout; see docs/hub.md
    // --release-image is required, but reported with every other finding of the run, not alone by
    // clap: the usage line says it is required all the same.
    #[command(
        override_usage = "ibi create hub-manifests --sites <INVENTORY> --release-image <REF> [--dir <DIR>] [OPTIONS]"
    )]
    HubManifests(CreateHubManifestsOpts),
    /// Write a commented image-based-installation-config.yaml template
    ImageConfigTemplate(CreateImageConfigTemplateOpts),
    /// Build the installation ISO rhcos-ibi.iso
    Image(CreateImageOpts),
}

/// The asset directory every `create` verb works in, as the installer's global `--dir`.
#[derive(Debug, Args)]
pub struct DirOpt {
    /// Directory holding the inputs and receiving the outputs
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct CreateConfigTemplateOpts {
    #[command(flatten)]
    pub dir: DirOpt,
    /// Overwrite an existing image-based-config.yaml
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct CreateConfigImageOpts {
    #[command(flatten)]
    pub dir: DirOpt,
    /// Generate new signers and a new kubeadmin password instead of reusing those kept in DIR/.ibi/
    /// (invalidates any kubeconfig already handed out for this site)
    #[arg(long)]
    pub rotate_crypto: bool,
    /// Build one ISO per site listed in INVENTORY (YAML, or CSV when named *.csv) into
    /// DIR/sites/<site>/, from the shared inputs in DIR; see docs/batch.md
    #[arg(long, value_name = "INVENTORY", conflicts_with = "rotate_crypto")]
    pub sites: Option<PathBuf>,
    /// Check each site against this seed image before writing anything: what its lifecycle-agent would
    /// refuse on the host (proxy, FIPS, machine networks and node IPs). REF as seedImage takes it: a
    /// registry reference or oci:PATH[:TAG]; see docs/config-image.md
    #[arg(long, value_name = "REF")]
    pub seed: Option<String>,
    /// Registry served over plain HTTP (repeatable) when reading --seed
    #[arg(long, value_name = "HOST[:PORT]", requires = "seed")]
    pub insecure_registry: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CreateHubManifestsOpts {
    #[command(flatten)]
    pub dir: DirOpt,
    /// The inventory (YAML, or CSV when named *.csv) whose sites the hub takes over, from the shared
    /// inputs in DIR, as `create config-image --sites` reads them
    #[arg(long, value_name = "INVENTORY")]
    pub sites: PathBuf,
    /// Only this site (repeatable); default: every site of the inventory
    #[arg(long, value_name = "SITE")]
    pub only: Vec<String>,
    /// Required: the release the sites run (the seed's release payload), for the hub's
    /// ClusterImageSet, e.g. quay.io/openshift-release-dev/ocp-release:4.18.0-x86_64
    #[arg(long, value_name = "REF")]
    pub release_image: Option<String>,
    /// The seed the sites run (REF as seedImage takes it), read for its version: a proxied site of
    /// a 4.16–4.19 seed is refused (the hub's manifest.json would break it). Default: seedVersion of
    /// DIR/image-based-installation-config.yaml, when there is one
    #[arg(long, value_name = "REF")]
    pub seed: Option<String>,
    /// Registry served over plain HTTP (repeatable) when reading --seed
    #[arg(long, value_name = "HOST[:PORT]", requires = "seed")]
    pub insecure_registry: Vec<String>,
    /// Import the sites whose cluster runs already (deploy ran their site or one-shot phase) into
    /// ACM (ManagedCluster, auto-import Secret, KlusterletAddonConfig) instead of refusing them
    #[arg(long)]
    pub adopt: bool,
    /// A running site to be installed again by the hub all the same (repeatable): it gets a
    /// ClusterInstance, and the hub reboots it into a new install keeping its identity
    #[arg(long, value_name = "SITE")]
    pub reinstall: Vec<String>,
    /// Where to write the manifests (default: DIR/hub)
    #[arg(long, value_name = "OUT")]
    pub out: Option<PathBuf>,
    /// The namespace of SiteConfig's IBI templates on the hub (where the SiteConfig operator runs)
    #[arg(
        long,
        value_name = "NAMESPACE",
        default_value = crate::hub::objects::DEFAULT_TEMPLATES_NAMESPACE
    )]
    pub templates_namespace: String,
    /// Write the Secrets as templates with their data left out (for sealed-secrets or
    /// external-secrets): each names, in a comment, what to fill every key with
    #[arg(long)]
    pub secret_templates: bool,
}

#[derive(Debug, Args)]
pub struct CreateImageConfigTemplateOpts {
    #[command(flatten)]
    pub dir: DirOpt,
    /// Overwrite an existing image-based-installation-config.yaml
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct CreateImageOpts {
    #[command(flatten)]
    pub dir: DirOpt,
    /// Base CoreOS live ISO: a local path or a URL (downloaded once into the user cache; a URL may
    /// carry `?sha256=HEX`). Default: OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE, then --coreos-stream, then
    /// the stream of the seed's release payload (--release-image)
    #[arg(long, value_name = "PATH|URL")]
    pub base_iso: Option<String>,
    /// Expected sha256 of the base ISO
    #[arg(long, value_name = "HEX")]
    pub base_iso_sha256: Option<String>,
    /// CoreOS stream metadata (JSON) to pick the live ISO for `architecture` from
    #[arg(long, value_name = "FILE|URL", conflicts_with = "base_iso")]
    pub coreos_stream: Option<String>,
    /// The release payload whose CoreOS stream names the base ISO, when none of the above is given.
    /// Default: the payload in the seed's containers.list. REF: a registry reference or oci:PATH[:TAG]
    #[arg(long, value_name = "REF", conflicts_with_all = ["base_iso", "coreos_stream"])]
    pub release_image: Option<String>,
    /// Registry served over plain HTTP (repeatable), e.g. a lab mirror or a test registry
    #[arg(long, value_name = "HOST[:PORT]")]
    pub insecure_registry: Vec<String>,
    /// Turn seed mismatches into warnings (disconnected builds that cannot reach the registry)
    #[arg(long)]
    pub skip_seed_checks: bool,
    /// Keep the seed's tag in the generated config instead of pinning it by digest
    #[arg(long)]
    pub no_pin_seed: bool,
    /// Embed even if the base ISO already carries an Ignition config
    #[arg(long)]
    pub force: bool,
    /// Write DIR/.ibi/rhcos-ibi.patch.json (the embed-area patch over the base ISO, 0600) instead
    /// of the ISO: `ibi serve` streams the same bytes from it, so many variants share one base ISO
    #[arg(long)]
    pub patch_only: bool,
    /// One-shot site install: carry the configuration tree of SITE_DIR/imagebasedconfig.iso (built
    /// by `ibi create config-image --dir SITE_DIR`) and write SITE_DIR/rhcos-ibi.iso (it holds the
    /// site's private keys); the host needs no configuration ISO
    #[arg(long, value_name = "SITE_DIR", conflicts_with = "patch_only")]
    pub site: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct InspectOpts {
    /// The ISO to inspect
    #[arg(value_name = "ISO")]
    pub iso: PathBuf,
    /// Print the raw embedded Ignition config (secrets included) instead of the summary
    #[arg(long, conflicts_with = "json")]
    pub ignition: bool,
    /// Print the summary as one JSON object (secrets hidden, as in the text)
    #[arg(long)]
    pub json: bool,
}

#[cfg(feature = "agent")]
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Install RHCOS and restore the seed, as `lca-cli ibi` does, from ibi-configuration.json.
    /// WIPES the configuration's installationDisk: every partition and all data on it are lost
    // Boxed: the install has many more options than fetch-config (clippy::large_enum_variant).
    Install(Box<AgentInstallOpts>),
    /// Wait for the `cluster-config` device and copy it to /opt/openshift
    FetchConfig(AgentFetchConfigOpts),
}

#[cfg(feature = "agent")]
#[derive(Debug, Args)]
pub struct AgentInstallOpts {
    /// The configuration `create image` embeds (the same file `lca-cli ibi -f` reads)
    #[arg(
        short = 'f',
        long = "config",
        default_value = "/var/tmp/ibi-configuration.json"
    )]
    pub config: PathBuf,
    /// Base of the configuration's relative paths (var/tmp/pull-secret.json, var/tmp/post.sh)
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Where the target's root partition is mounted (boot goes under it)
    #[arg(long, default_value = "/mnt")]
    pub sysroot_mount: PathBuf,
    /// Where the container storage (the extra partition) is mounted; precached images go to its storage/
    #[arg(long, default_value = "/var/lib/containers")]
    pub containers_mount: PathBuf,
    /// The install state while on the live system (it moves onto the target disk once mounted)
    #[arg(long, default_value = "/var/tmp/ibi-install-state.json")]
    pub state_file: PathBuf,
    /// JSON status: step, bytes, images pulled and failed
    #[arg(long, default_value = "/var/tmp/ibi-status.json")]
    pub status_file: PathBuf,
    /// Mirrors (precache rewrite rule) and insecure registries (no TLS check) of the live system
    #[arg(long, default_value = "/etc/containers/registries.conf")]
    pub registries_conf: PathBuf,
    /// Pull secret for the seed and the precached images [default: <root>/var/tmp/pull-secret.json if present]
    #[arg(long)]
    pub authfile: Option<PathBuf>,
    /// The program run as `<program> install <disk> <coreosInstallerArgs…>`
    #[arg(long, default_value = "coreos-installer", value_name = "PROGRAM")]
    pub coreos_installer: String,
    /// containers-storage driver of the precached images
    #[arg(long, default_value = "overlay", value_parser = ["overlay", "vfs"])]
    pub storage_driver: String,
    /// Ignore any recorded state (here or on the disk) and start over with the disk wipe
    #[arg(long)]
    pub fresh: bool,
    /// Report settings written by `create image` with statusURL (absent: no reports)
    /// [default: <root>/var/tmp/ibi-report.json]
    #[arg(long, value_name = "FILE")]
    pub report_config: Option<PathBuf>,
}

#[cfg(feature = "agent")]
#[derive(Debug, Args)]
pub struct AgentFetchConfigOpts {
    /// Where the configuration is copied (lifecycle-agent's post-pivot reads it there)
    #[arg(long, default_value = "/opt/openshift")]
    pub target: PathBuf,
    /// Give up after this many seconds (default: wait forever, like post-pivot)
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Probe only this kernel block device name (repeatable, e.g. `sr0`); default: every device
    #[arg(long, value_name = "NAME")]
    pub device: Vec<String>,
}

/// How `serve` and `deploy` serve the ISOs.
#[derive(Debug, Args)]
pub struct ServerOpts {
    /// Address and port to serve on, ISOs and host reports (port 0: any free port)
    #[arg(long, default_value = "0.0.0.0:8443", value_name = "ADDR:PORT")]
    pub listen: std::net::SocketAddr,
    /// TLS certificate chain (PEM) instead of the self-signed one kept in the directory's .ibi/
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key",
        conflicts_with = "plain_http"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The key of --tls-cert (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Base URL BMCs reach this server at (required when listening on every address)
    #[arg(long, value_name = "URL")]
    pub public_url: Option<reqwest::Url>,
    /// Serve plain HTTP (many BMCs cannot fetch virtual media over HTTPS)
    #[arg(long)]
    pub plain_http: bool,
    /// Also serve a live status page of the fleet under the directory (host names, steps, errors,
    /// journal lines; never a secret) at a URL with a token of its own, printed once to stderr
    #[arg(long)]
    pub dashboard: bool,
}

#[derive(Debug, Args)]
pub struct ServeOpts {
    #[command(flatten)]
    pub dir: DirOpt,
    #[command(flatten)]
    pub server: ServerOpts,
    /// Give every image a new URL (the old ones stop working)
    #[arg(long)]
    pub rotate_tokens: bool,
    /// Also serve every built site's one-shot installation ISO (sites/<site>/rhcos-ibi.iso): the
    /// installation ISO carrying that site's configuration and secrets, made as it streams
    #[arg(long)]
    pub one_shot: bool,
    /// Connections one client address may hold at once; more are closed (a BMC uses 1-4; raise it
    /// when many BMCs reach the server through one NAT address)
    #[arg(long, default_value_t = 32, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub max_per_address: u16,
}

/// Which device the host boots after the insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BootDevice {
    /// One-time boot from the virtual CD: the installation ISO (factory)
    Cd,
    /// Boot from disk, the CD left inserted: the configuration ISO (site)
    Disk,
}

#[derive(Debug, Args)]
pub struct BootOpts {
    /// The BMC: its address, its service root, its Systems collection or one System
    #[arg(long, value_name = "URL")]
    pub bmc: reqwest::Url,
    /// The image URL (from `ibi serve`); also IBI_ISO_URL, which keeps it out of `ps`
    #[arg(long, value_name = "URL", env = "IBI_ISO_URL", hide_env_values = true,
          value_parser = parse_secret)]
    pub iso: Option<crate::util::secret::Secret>,
    /// cd: one-time boot from the ISO (installation ISO); disk: boot the disk with the ISO
    /// attached (configuration ISO), or without --iso with every CD ejected (one-shot install)
    #[arg(long = "boot", value_enum, default_value = "cd")]
    pub boot: BootDevice,
    /// Eject every virtual CD and clear a CD boot override, then stop
    #[arg(long, conflicts_with = "iso")]
    pub eject: bool,
    /// The system's Id or last path segment, when the BMC has several
    #[arg(long, value_name = "ID")]
    pub system: Option<String>,
    /// BMC user (also IBI_BMC_USER); the password comes from --bmc-password-file or IBI_BMC_PASSWORD
    #[arg(long, value_name = "USER", env = "IBI_BMC_USER")]
    pub bmc_user: Option<String>,
    /// File whose first line is the BMC password
    #[arg(long, value_name = "FILE")]
    pub bmc_password_file: Option<PathBuf>,
    /// CA bundle (PEM) the BMC's certificate must chain to, instead of the system's
    #[arg(long, value_name = "FILE", conflicts_with = "bmc_insecure")]
    pub bmc_ca: Option<PathBuf>,
    /// Do not verify the BMC's TLS certificate
    #[arg(long)]
    pub bmc_insecure: bool,
    /// The image server's certificate (PEM), uploaded to the BMC so it verifies the server
    #[arg(long, value_name = "FILE")]
    pub iso_ca: Option<PathBuf>,
    /// Give up after this many seconds (power changes and the BMC's download included)
    #[arg(long, value_name = "SECONDS", default_value_t = 900)]
    pub timeout: u64,
}

#[derive(Debug, Args)]
pub struct WatchOpts {
    /// The site's directory, as `create config-image --dir` wrote it (auth/kubeconfig and
    /// imagebasedconfig.iso are read)
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub dir: PathBuf,
    /// Give up after this many seconds (0: look once); the default is image-based-install-operator's
    #[arg(long, value_name = "SECONDS", default_value_t = crate::deliver::watch::DEFAULT_TIMEOUT.as_secs())]
    pub timeout: u64,
    /// Seconds between two looks at the cluster (fractions allowed)
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_interval)]
    pub interval: std::time::Duration,
    /// Print the result as one JSON document on stdout (the milestone lines go to stderr)
    #[arg(long)]
    pub json: bool,
    /// The host was installed from DIR's one-shot ISO (create image --site): judge it by the
    /// configuration that ISO carries, not by imagebasedconfig.iso as it is now
    #[arg(long)]
    pub one_shot: bool,
}

fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.05..=3600.0).contains(&secs) {
        return Err(format!("{s} s is outside 0.05 to 3600 seconds"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// What to say beside a usage error for a command line that names a subcommand this build lacks:
/// `ibi agent` in a build without the `agent` feature.
pub fn usage_hint(args: &[String]) -> Option<&'static str> {
    let sub = args.iter().skip(1).find(|a| !a.starts_with('-'))?;
    (sub == "agent" && !cfg!(feature = "agent")).then_some(
        "`ibi agent` exists only in builds with the `agent` feature (the host side, which needs \
         libostree): `cargo install --path . --features agent`, or the host-agent image (Containerfile)",
    )
}

fn parse_secret(s: &str) -> Result<crate::util::secret::Secret, String> {
    Ok(crate::util::secret::Secret::new(s))
}

/// The phase `ibi deploy` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeployPhase {
    /// Boot each host from the installation ISO, wait for its report, eject
    Factory,
    /// Boot each host from disk with its configuration ISO, watch the cluster, eject once ready
    Site,
    /// One-shot: boot each host once from its own installation ISO carrying its site's
    /// configuration, wait for its report, eject and boot the disk, watch the cluster
    Oneshot,
}

#[derive(Debug, Args)]
pub struct DeployOpts {
    /// The fleet's base directory (the shared inputs, rhcos-ibi.iso, sites/<site>/)
    #[arg(long, default_value = ".", value_name = "BASE")]
    pub dir: PathBuf,
    /// The batch inventory (YAML or CSV) whose sites carry bmc:
    #[arg(long, value_name = "INVENTORY")]
    pub sites: PathBuf,
    #[arg(long, value_enum)]
    pub phase: DeployPhase,
    /// Only this site (repeatable)
    #[arg(long, value_name = "SITE")]
    pub only: Vec<String>,
    /// Start this site's phase over: boot it again even if it was booted or done (repeatable);
    /// without it a re-run never boots a host twice for one phase
    #[arg(long, value_name = "SITE")]
    pub redo: Vec<String>,
    /// Only check every selected site (inventory, credentials, CA files, each BMC's login, System
    /// and CD, the installation ISO's statusURL and statusCA) and change nothing
    #[arg(long)]
    pub check: bool,
    /// BMC jobs, and so image downloads, at once
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub parallel: u16,
    #[command(flatten)]
    pub server: ServerOpts,
    /// Seconds one BMC job may take (power off, eject, insert with its download, power on)
    #[arg(long, default_value_t = 900, value_name = "S")]
    pub bmc_timeout: u64,
    /// Factory and oneshot: seconds from the boot to the host's final report (or its power off)
    #[arg(long, default_value_t = 3600, value_name = "S")]
    pub report_timeout: u64,
    /// Site: seconds from the boot to the cluster ready (the operator's hour); oneshot: from the
    /// disk boot
    #[arg(long, default_value_t = 3600, value_name = "S")]
    pub watch_timeout: u64,
    /// Seconds between two looks at the reports, a host's power or a cluster
    #[arg(long, default_value_t = 10, value_name = "S",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub poll: u64,
}

#[derive(Debug, Args)]
pub struct StatusOpts {
    /// The directory `ibi serve` and `ibi deploy` keep their records in (DIR/.ibi/)
    #[arg(long, default_value = ".", value_name = "BASE")]
    pub dir: PathBuf,
    /// Only this site
    #[arg(long, value_name = "SITE")]
    pub site: Option<String>,
    /// Also print the journal lines failed hosts sent
    #[arg(long)]
    pub logs: bool,
    /// JSON on stdout, for scripts
    #[arg(long)]
    pub json: bool,
    /// Write the fleet to FILE as one self-contained HTML page (0644, replaced atomically), the
    /// failed hosts' journal lines included; prints FILE
    #[arg(long, value_name = "FILE", conflicts_with = "json")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompletionOpts {
    /// Shell to generate the script for
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn agent_hint_only_where_the_feature_is_missing() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let hint = usage_hint(&args(&["ibi", "--log-level=debug", "agent", "install"]));
        assert_eq!(hint.is_some(), !cfg!(feature = "agent"));
        assert_eq!(
            usage_hint(&args(&["ibi", "agent"])).is_some(),
            !cfg!(feature = "agent")
        );
        assert_eq!(usage_hint(&args(&["ibi", "bogus"])), None);
    }

    #[test]
    fn log_level_takes_levels_only() {
        let e = Cli::try_parse_from(["ibi", "--log-level", "bogus", "inspect", "x.iso"])
            .expect_err("bogus level");
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidValue);
    }

    #[test]
    fn config_image_takes_dir_and_rotate_flag() {
        let cli = Cli::try_parse_from([
            "ibi",
            "create",
            "config-image",
            "--dir",
            "/s",
            "--rotate-crypto",
        ])
        .expect("parses");
        match cli.command {
            Command::Create(CreateCommand::ConfigImage(o)) => {
                assert_eq!(o.dir.dir, PathBuf::from("/s"));
                assert!(o.rotate_crypto);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn config_image_takes_a_seed_and_insecure_registries_only_with_it() {
        let cli = Cli::try_parse_from([
            "ibi",
            "create",
            "config-image",
            "--seed",
            "oci:/srv/seed:4.18.0",
            "--insecure-registry",
            "127.0.0.1:5000",
        ])
        .expect("parses");
        match cli.command {
            Command::Create(CreateCommand::ConfigImage(o)) => {
                assert_eq!(o.seed.as_deref(), Some("oci:/srv/seed:4.18.0"));
                assert_eq!(o.insecure_registry, ["127.0.0.1:5000"]);
            }
            other => panic!("unexpected {other:?}"),
        }
        let e = Cli::try_parse_from([
            "ibi",
            "create",
            "config-image",
            "--insecure-registry",
            "127.0.0.1:5000",
        ])
        .expect_err("needs --seed");
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn dir_defaults_to_current_directory() {
        let cli = Cli::try_parse_from(["ibi", "create", "config-template"]).expect("parses");
        match cli.command {
            Command::Create(CreateCommand::ConfigTemplate(o)) => {
                assert_eq!(o.dir.dir, PathBuf::from("."));
                assert!(!o.force);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
