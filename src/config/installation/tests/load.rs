//! Loading the directory: the config with `post.sh`, the script's problems, and the findings of both.

use super::fixtures::*;
use crate::config::installation::*;

#[test]
fn load_reads_config_and_post_sh() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        base().as_bytes(),
    );
    let inputs = load_installation_inputs(tmp.path()).unwrap();
    assert_eq!(inputs.config.seed_version, "4.20.0");
    assert_eq!(inputs.post_sh, None);
    assert!(inputs.warnings.is_empty());

    write(tmp.path(), POST_SH_FILE, b"#!/bin/bash\necho done\n");
    let inputs = load_installation_inputs(tmp.path()).unwrap();
    assert_eq!(
        inputs.post_sh.as_deref(),
        Some(b"#!/bin/bash\necho done\n".as_slice())
    );
    assert!(
        tmp.path().join(POST_SH_FILE).exists(),
        "inputs are never deleted"
    );

    write(tmp.path(), POST_SH_FILE, b"echo done\n");
    let inputs = load_installation_inputs(tmp.path()).unwrap();
    assert_eq!(
        inputs.warnings,
        [
            "post.sh: has no #! line: lca-cli ibi runs it with `bash -c`, so it runs as a bash script"
        ]
    );
}

#[test]
fn load_reports_post_sh_problems() {
    let cases: &[(&[u8], &str)] = &[
        (
            b"",
            "post.sh: is empty: remove it, or give the script lca-cli ibi should run after restoring the seed",
        ),
        (
            b"#!/bin/bash\r\necho\r\n",
            "post.sh: the #! line ends with a carriage return (CRLF line endings): the interpreter would not be found",
        ),
    ];
    for (content, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            IMAGE_BASED_INSTALLATION_CONFIG_FILE,
            base().as_bytes(),
        );
        write(tmp.path(), POST_SH_FILE, content);
        assert_eq!(load_findings(tmp.path()), [*want]);
    }
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        base().as_bytes(),
    );
    std::fs::create_dir(tmp.path().join(POST_SH_FILE)).unwrap();
    assert_eq!(
        load_findings(tmp.path()),
        ["post.sh: must be a regular file (the post-deployment script)"]
    );
    std::fs::remove_dir(tmp.path().join(POST_SH_FILE)).unwrap();
    std::os::unix::fs::symlink("missing.sh", tmp.path().join(POST_SH_FILE)).unwrap();
    assert_eq!(
        load_findings(tmp.path()),
        ["post.sh: is a symbolic link to nothing"]
    );
}

#[test]
fn load_collects_findings_of_both_files() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().display();
    write(tmp.path(), POST_SH_FILE, b"");
    assert_eq!(load_findings(tmp.path()), [
        format!(
            "image-based-installation-config.yaml: file not found: {d}/image-based-installation-config.yaml is required (`ibi create image-config-template` writes a commented one)"
        ),
        "post.sh: is empty: remove it, or give the script lca-cli ibi should run after restoring the seed".to_string(),
    ]);
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        b"seedImage: x\nbogus: 1\n",
    );
    let f = load_findings(tmp.path());
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f[0].starts_with("image-based-installation-config.yaml: unknown field `bogus`"),
        "{f:?}"
    );
}
