//! The hosts' part in deliver tests: what a booted installation ISO runs to report to ibi's server,
//! played against the live server from the ISO's own Ignition (its `ibi-report.sh` and settings), on
//! a fake root with the host's identity (DMI product UUID, hostname, boot ID) and a `journalctl`
//! stand-in; plus a test CA with a server certificate for 127.0.0.1.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A CA and a server certificate for 127.0.0.1 signed by it, as PEM files under `dir`.
pub fn test_tls(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use openssl::asn1::Asn1Time;
    use openssl::hash::MessageDigest;
    use openssl::pkey::PKey;
    use openssl::rsa::Rsa;
    use openssl::x509::extension::{BasicConstraints, KeyUsage, SubjectAlternativeName};
    use openssl::x509::{X509, X509NameBuilder};
    let cert = |cn: &str, signer: Option<(&X509, &PKey<openssl::pkey::Private>)>| {
        let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", cn).unwrap();
        let name = name.build();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        let serial = openssl::bn::BigNum::from_u32(if signer.is_some() { 2 } else { 1 }).unwrap();
        b.set_serial_number(&serial.to_asn1_integer().unwrap())
            .unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
            .unwrap();
        b.set_not_after(&Asn1Time::days_from_now(2).unwrap())
            .unwrap();
        match signer {
            None => {
                b.set_issuer_name(&name).unwrap();
                b.append_extension(BasicConstraints::new().critical().ca().build().unwrap())
                    .unwrap();
                b.append_extension(KeyUsage::new().key_cert_sign().crl_sign().build().unwrap())
                    .unwrap();
                b.sign(&key, MessageDigest::sha256()).unwrap();
            }
            Some((ca, ca_key)) => {
                b.set_issuer_name(ca.subject_name()).unwrap();
                let san = SubjectAlternativeName::new()
                    .ip("127.0.0.1")
                    .build(&b.x509v3_context(Some(ca), None))
                    .unwrap();
                b.append_extension(san).unwrap();
                b.sign(ca_key, MessageDigest::sha256()).unwrap();
            }
        }
        (b.build(), key)
    };
    let (ca, ca_key) = cert("ibi reports test CA", None);
    let (leaf, leaf_key) = cert("127.0.0.1", Some((&ca, &ca_key)));
    let tls = dir.join("tls");
    std::fs::create_dir_all(&tls).unwrap();
    let paths = (
        tls.join("ca.crt"),
        tls.join("server.crt"),
        tls.join("server.key"),
    );
    std::fs::write(&paths.0, ca.to_pem().unwrap()).unwrap();
    std::fs::write(&paths.1, leaf.to_pem().unwrap()).unwrap();
    std::fs::write(&paths.2, leaf_key.private_key_to_pem_pkcs8().unwrap()).unwrap();
    paths
}

pub fn ok(out: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{what}: {}\nstdout:\n{}\nstderr:\n{stderr}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The installation ISO's Ignition config as coreos-installer reads it from the ISO.
pub fn iso_ignition(iso: &Path) -> Value {
    let out = Command::new("coreos-installer")
        .args(["iso", "ignition", "show"])
        .arg(iso)
        .output()
        .unwrap();
    serde_json::from_str(&ok(&out, "coreos-installer iso ignition show")).unwrap()
}

pub fn ignition_file(ign: &Value, path: &str) -> Vec<u8> {
    let f = ign["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("{path} not in the Ignition config"));
    ibi::ignition::decode_data_url(f["contents"]["source"].as_str().unwrap()).unwrap()
}

/// A live system's root as the tests' hosts see it: the files Ignition wrote, the host's identity, and
/// a `journalctl` stand-in on `bin/` that prints `journal` (the unit's last lines).
pub struct Host {
    pub root: tempfile::TempDir,
}

impl Host {
    pub fn new(ign: &Value, uuid: &str, hostname: &str, journal: &str) -> Host {
        let root = tempfile::tempdir().unwrap();
        let put = |rel: &str, bytes: &[u8], mode: u32| {
            let p = root.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, bytes).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        for f in [
            "/var/tmp/ibi-report.json",
            "/var/tmp/pull-secret.json",
            "/var/tmp/ibi-configuration.json",
        ] {
            put(f.trim_start_matches('/'), &ignition_file(ign, f), 0o600);
        }
        if let Some(s) = try_file(ign, "/usr/local/bin/ibi-report.sh") {
            put("usr/local/bin/ibi-report.sh", &s, 0o555);
        }
        // The firmware gives the UUID in upper case; hosts report it in lower case.
        put(
            "sys/class/dmi/id/product_uuid",
            format!("{}\n", uuid.to_uppercase()).as_bytes(),
            0o444,
        );
        put(
            "proc/sys/kernel/hostname",
            format!("{hostname}\n").as_bytes(),
            0o444,
        );
        put(
            "proc/sys/kernel/random/boot_id",
            format!("boot-{uuid}\n").as_bytes(),
            0o444,
        );
        put("journal.txt", journal.as_bytes(), 0o444);
        let journalctl = format!(
            "#!/bin/sh\n# journalctl stand-in: the install unit's last lines in this boot.\ncat '{}'\n",
            root.path().join("journal.txt").display()
        );
        put("bin/journalctl", journalctl.as_bytes(), 0o755);
        Host { root }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    pub fn env_path(&self) -> String {
        format!(
            "{}:{}",
            self.path("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// The agent's reporter on this host, as `ibi agent install` drives it: three steps begun and
    /// finished, then the end; what the reporter says of the final report's delivery.
    #[cfg(feature = "agent")]
    pub fn agent_reports_three_steps(&self) -> ibi::agent::report::Delivery {
        self.agent_reports(Ok(()), Vec::new())
    }

    /// The agent's reporter on this host: the install failed in its third step with `error`, these
    /// journal lines sent with the final report.
    #[cfg(feature = "agent")]
    pub fn agent_reports_failure(
        &self,
        error: &str,
        logs: Vec<String>,
    ) -> ibi::agent::report::Delivery {
        self.agent_reports(Err(error), logs)
    }

    #[cfg(feature = "agent")]
    fn agent_reports(
        &self,
        outcome: Result<(), &str>,
        logs: Vec<String>,
    ) -> ibi::agent::report::Delivery {
        use ibi::agent::report::ReporterSetup;
        use ibi::agent::state::{Progress, Step};
        let setup = ReporterSetup {
            config_file: self.path("var/tmp/ibi-report.json"),
            root: self.root.path().to_path_buf(),
            authfile: Some(self.path("var/tmp/pull-secret.json")),
            journalctl: self.path("bin/journalctl").to_string_lossy().into_owned(),
            unit: "ibi-agent-install.service".into(),
        };
        let reporter = std::sync::Arc::new(setup.start().unwrap().unwrap());
        let progress = Progress::new(&self.path("status.json"));
        progress.observe(reporter.observer());
        for step in [Step::DiskCleanup, Step::WriteRhcos, Step::FetchSeed] {
            progress.begin(step);
            if step != Step::FetchSeed || outcome.is_ok() {
                progress.finish();
            }
        }
        reporter.finish(progress.snapshot(), outcome, logs)
    }

    /// `ibi-report.sh STATE` as the lca report units run it, with `extra` environment (systemd's
    /// MONITOR_* for the failure unit).
    pub fn lca_report(&self, state: &str, extra: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new("bash");
        cmd.arg(self.path("usr/local/bin/ibi-report.sh"))
            .arg(state)
            .env("PATH", self.env_path())
            .env("IBI_REPORT_CONFIG", self.path("var/tmp/ibi-report.json"))
            .env("PULL_SECRET_FILE", self.path("var/tmp/pull-secret.json"))
            .env(
                "PRODUCT_UUID_FILE",
                self.path("sys/class/dmi/id/product_uuid"),
            )
            .env("HOSTNAME_FILE", self.path("proc/sys/kernel/hostname"));
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }
}

pub fn try_file(ign: &Value, path: &str) -> Option<Vec<u8>> {
    ign["storage"]["files"]
        .as_array()?
        .iter()
        .find(|f| f["path"] == path)
        .and_then(|f| ibi::ignition::decode_data_url(f["contents"]["source"].as_str()?))
}
