//! Strict decoding, the defaults of absent keys, the accessors and the file's name.

use super::fixtures::*;
use crate::config::installation::*;

#[test]
fn strict_decoding() {
    let c = parse_installation_config(&format!(
        "apiVersion: v1beta1\nkind: ImageBasedInstallationConfig\nmetadata: {{name: x}}\n{}",
        base()
    ));
    assert!(c.is_ok(), "{c:?}");
    for key in [
        "imageContentSources",
        "useContainersFolder",
        "rhcosLiveIso",
        "nmStateConfig",
    ] {
        let err = parse_installation_config(&format!("{}{key}: x\n", base())).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "image-based-installation-config.yaml: unknown field `{key}`, expected one of `apiVersion`"
            )),
            "{msg}"
        );
        assert!(msg.ends_with(" at line 5 column 1"), "{msg}");
    }
    let err = parse_installation_config("extraPartitionNumber: -1\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "image-based-installation-config.yaml: extraPartitionNumber: invalid type: integer `-1`, expected u32 at line 1 column 23"
    );
    assert_eq!(
        parse_installation_config("# nothing\n")
            .unwrap_err()
            .to_string(),
        "image-based-installation-config.yaml: the file is empty"
    );
}

#[test]
fn defaults_apply_only_to_absent_keys() {
    let c = parse_installation_config(&base()).unwrap();
    assert_eq!(c.extra_partition_start(), "-40G");
    assert_eq!(c.extra_partition_label(), "var-lib-containers");
    assert_eq!(c.extra_partition_number(), 5);
    assert_eq!(c.architecture(), "amd64");
    assert_eq!((c.shutdown, c.skip_disk_cleanup), (false, false));
    assert_eq!((c.precache_best_effort, c.precache_disabled), (None, None));
    assert!(c.image_digest_sources().is_empty());
    assert_eq!(c.ignition_config_override(), None);
    assert_eq!(c.canonical_network_config().unwrap(), None);

    let text = format!(
        "{}extraPartitionStart: ''\nextraPartitionLabel: ''\nextraPartitionNumber: 6\narchitecture: arm64\n\
         precacheBestEffort: false\nshutdown: true\nsshKey:\nliveKernelArgs:\n",
        base()
    );
    let c = parse_installation_config(&text).unwrap();
    assert_eq!(c.extra_partition_start(), "");
    assert_eq!(c.extra_partition_label(), "");
    assert_eq!(c.extra_partition_number(), 6);
    assert_eq!(c.architecture(), "arm64");
    assert_eq!(c.precache_best_effort, Some(false));
    assert!(c.shutdown);
    assert_eq!(c.ssh_key, "");

    // A YAML null is an absent key, as in the installer's decoder.
    let c = parse_installation_config(&format!("{}extraPartitionStart:\n", base())).unwrap();
    assert_eq!(c.extra_partition_start(), "-40G");
}

#[test]
fn accessors() {
    let c = parse_installation_config(&format!(
        "{}imageDigestSources: [{{source: quay.io/a, mirrors: [m.lab/a]}}]\n\
         ignitionConfigOverride: '{{\"ignition\":{{\"version\":\"3.2.0\"}}}}'\n\
         networkConfig: {{interfaces: [{{type: ethernet, name: eth0, state: up}}]}}\n",
        base()
    ))
    .unwrap();
    assert_eq!(c.image_digest_sources()[0].mirrors, ["m.lab/a"]);
    assert_eq!(
        c.ignition_config_override(),
        Some(r#"{"ignition":{"version":"3.2.0"}}"#)
    );
    assert_eq!(
        c.canonical_network_config().unwrap().as_deref(),
        Some("interfaces:\n- name: eth0\n  state: up\n  type: ethernet\n")
    );
}

#[test]
fn the_placeholder_list_names_this_file_as_it_is() {
    assert_eq!(
        crate::config::placeholder::INSTALLATION_FILE,
        IMAGE_BASED_INSTALLATION_CONFIG_FILE
    );
}
