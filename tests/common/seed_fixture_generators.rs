//! What the tests of tests/root/seed_fixture_generators.rs and
//! tests/tools/seed_fixture_generators.rs share: one file of tests, split by what each test needs
//! (docs/architecture.md, "Tests").

#![cfg(feature = "agent")]
use ibi::agent::disk::{LoopDevice, find_partition_by_label};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) const SEED_INFO_LABEL: &str = "com.openshift.lifecycle-agent.seed_cluster_info";
pub(crate) const FORMAT_LABEL: &str = "com.openshift.lifecycle-agent.seed_format_version";

pub(crate) fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seed-fixtures")
        .join(name)
}

pub(crate) fn run(program: &Path, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} {args:?}: {stderr}",
        program.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn tool(name: &str) -> &Path {
    Path::new(name)
}

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `ostree.tgz` is a repo whose log shows the commit `rpm-ostree.json` boots, with a kernel.
pub(crate) fn check_ostree(files: &Path, tmp: &Path) {
    let rpm_ostree = fs::read_to_string(files.join("rpm-ostree.json")).unwrap();
    let (checksum, deployment) =
        ibi::agent::ostree_restore::booted_deployment(&rpm_ostree).unwrap();
    assert_eq!(deployment, format!("{checksum}.0"));
    assert!(files.join(format!("ostree-{deployment}.origin")).is_file());
    let repo = tmp.join("repo");
    fs::create_dir(&repo).unwrap();
    run(
        tool("tar"),
        &["-xzf", s(&files.join("ostree.tgz")), "-C", s(&repo)],
    );
    let repo_arg = format!("--repo={}", s(&repo));
    let log = run(tool("ostree"), &["log", &repo_arg, &checksum]);
    assert!(log.contains(&format!("commit {checksum}")), "{log}");
    let ls = run(
        tool("ostree"),
        &["ls", "-R", &repo_arg, &checksum, "/usr/lib/modules"],
    );
    assert!(
        ls.contains("/vmlinuz") && ls.contains("/initramfs.img"),
        "{ls}"
    );
    let mco = fs::read_to_string(files.join("mco-currentconfig.json")).unwrap();
    let kargs = ibi::agent::ostree_restore::kernel_args(&mco).unwrap();
    assert_eq!(kargs.len(), 3, "{kargs:?}");
}

/// `etc.deletions`, `containers.list`, the archives' key members, and the precache layout.
pub(crate) fn check_lists(files: &Path, info: &serde_json::Value, precache: &Path) {
    let deletions = fs::read_to_string(files.join("etc.deletions")).unwrap();
    assert_eq!(deletions.lines().count(), 3, "{deletions}");
    let etc = run(
        tool("tar"),
        &["--xattrs", "-tvvzf", s(&files.join("etc.tgz"))],
    );
    assert!(etc.contains("user.ibi.fixture"), "{etc}");
    let var = run(tool("tar"), &["-tvzf", s(&files.join("var.tgz"))]);
    for member in [
        "var/lib/kubelet/",
        "var/lib/etcd/member/",
        "var/opt/",
        "kubelet-client-current.pem -> ",
    ] {
        assert!(var.contains(member), "{member} missing: {var}");
    }

    let list = fs::read_to_string(files.join("containers.list")).unwrap();
    let registry = info["release_registry"].as_str().unwrap();
    let tsv = fs::read_to_string(precache.join("images.tsv")).unwrap();
    let entries: Vec<&str> = list.lines().collect();
    assert_eq!(entries.len(), tsv.lines().count(), "{list}\n{tsv}");
    for (entry, row) in entries.iter().zip(tsv.lines()) {
        let cols: Vec<&str> = row.split(' ').collect();
        assert_eq!(*entry, format!("{registry}/{}{}", cols[1], cols[2]));
        let inspect: serde_json::Value = serde_json::from_str(&run(
            tool("skopeo"),
            &["inspect", &format!("oci:{}:{}", s(precache), cols[0])],
        ))
        .unwrap();
        if let Some(digest) = cols[2].strip_prefix('@') {
            assert_eq!(inspect["Digest"], digest);
        }
    }
}

/// A loop device over partition `label` of `img`.
pub(crate) fn attach_partition(img: &Path, label: &str) -> LoopDevice {
    let part = find_partition_by_label(img, label).unwrap();
    LoopDevice::attach_range(img, part.offset_bytes(), part.len_bytes()).unwrap()
}
