use serde_json::{Value, json};

use super::*;

fn spec<'a>(network: &'a Value, hints: &'a RootDeviceHints, ntp: &'a [String]) -> ClusterSpec<'a> {
    ClusterSpec {
        cluster_name: "sno-a17",
        base_domain: "edge.example.com",
        ssh_key: "ssh-ed25519 AAAA x",
        machine_networks: vec!["192.168.122.0/23"],
        proxy: None,
        ntp_sources: ntp,
        image_set: "ibi-4.18.0",
        templates_namespace: "open-cluster-management",
        ca_bundle: true,
        extra_manifests: false,
        node: NodeSpec {
            hostname: "sno-a17",
            bmc_address: "redfish-virtualmedia+https://10.0.0.9/redfish/v1/Systems/1".into(),
            bmc_secret: bmc_secret_name("sno-a17"),
            boot_mac: "52:54:00:aa:17:01",
            boot_mode: Some("UEFISecureBoot"),
            root_device_hints: Some(hints),
            network_config: Some(network),
        },
    }
}

#[test]
fn cluster_instance_has_the_fields_the_schema_and_templates_need() {
    let network = json!({"interfaces": [
        {"name": "eth0", "type": "ethernet", "mac-address": "52:54:00:aa:17:01"},
        {"name": "eth0.19", "type": "vlan"},
    ]});
    let hints = RootDeviceHints {
        device_name: Some("/dev/sda".into()),
        ..RootDeviceHints::default()
    };
    let ntp = ["0.pool.ntp.org".to_string()];
    let ci = cluster_instance(&spec(&network, &hints, &ntp)).unwrap();
    assert_eq!(ci["apiVersion"], CLUSTER_INSTANCE_API);
    assert_eq!(
        ci["metadata"],
        json!({"name": "sno-a17", "namespace": "sno-a17"})
    );
    let s = &ci["spec"];
    for key in [
        "baseDomain",
        "clusterImageSetNameRef",
        "clusterName",
        "nodes",
        "pullSecretRef",
        "templateRefs",
    ] {
        assert!(!s[key].is_null(), "{key} missing");
    }
    assert_eq!(s["clusterType"], "SNO");
    assert_eq!(s["templateRefs"][0]["name"], CLUSTER_TEMPLATES);
    assert_eq!(s["machineNetwork"], json!([{"cidr": "192.168.122.0/23"}]));
    assert_eq!(s["caBundleRef"], json!({"name": CA_BUNDLE_NAME}));
    assert!(s.get("extraManifestsRefs").is_none());
    assert!(s.get("proxy").is_none());
    let node = &s["nodes"][0];
    assert_eq!(node["templateRefs"][0]["name"], NODE_TEMPLATES);
    assert_eq!(node["bmcCredentialsName"]["name"], "sno-a17-bmc-secret");
    assert_eq!(node["bootMode"], "UEFISecureBoot");
    assert_eq!(node["rootDeviceHints"], json!({"deviceName": "/dev/sda"}));
    assert_eq!(
        node["nodeNetwork"]["interfaces"],
        json!([{"name": "eth0", "macAddress": "52:54:00:aa:17:01"}])
    );
    assert_eq!(node["nodeNetwork"]["config"], network);
}

#[test]
fn yaml_keeps_yaml11_words_strings() {
    // A namespace `n` or `on` is a boolean to kubectl's YAML 1.1 reader unless quoted.
    let text = to_yaml(&namespace("on")).unwrap();
    assert!(text.contains("name: 'on'"), "{text}");
}

#[test]
fn secrets_are_base64_data_and_redacted_when_shown() {
    let password = Secret::new("pa:ss".to_string());
    let text = bmc_secret(
        "sno-a17",
        "h-bmc-secret",
        "admin",
        &password,
        SecretData::Values,
    )
    .unwrap();
    assert_eq!(format!("{text:?}"), "<redacted>");
    let doc: Value = serde_yaml_ng::from_str(text.expose()).unwrap();
    assert_eq!(doc["type"], "Opaque");
    assert_eq!(doc["data"]["username"], "YWRtaW4=");
    assert_eq!(doc["data"]["password"], "cGE6c3M=");
    assert!(!text.expose().contains("pa:ss"));
    let ps = pull_secret(
        "sno-a17",
        &Secret::new(r#"{"auths":{}}"#.to_string()),
        SecretData::Values,
    )
    .unwrap();
    let doc: Value = serde_yaml_ng::from_str(ps.expose()).unwrap();
    assert_eq!(doc["type"], "kubernetes.io/dockerconfigjson");
    assert_eq!(doc["data"][".dockerconfigjson"], "eyJhdXRocyI6e319");
}

#[test]
fn templates_keep_every_key_and_leave_the_data_out() {
    let password = Secret::new("s3cret-pw".to_string());
    let text = bmc_secret(
        "sno-a17",
        "h-bmc-secret",
        "admin",
        &password,
        SecretData::Templates,
    )
    .unwrap();
    assert!(
        !text.expose().contains("czNjcmV0LXB3"),
        "the base64 of the password"
    );
    assert!(!text.expose().contains("s3cret-pw"));
    assert!(
        text.expose().starts_with("# A template"),
        "{}",
        text.expose()
    );
    assert!(text.expose().contains("#   password: the BMC password"));
    let doc: Value = serde_yaml_ng::from_str(text.expose()).unwrap();
    assert_eq!(doc["data"], json!({"username": "", "password": ""}));
    assert_eq!(doc["metadata"]["labels"][BACKUP_LABEL], "true");
}

#[test]
fn identity_secrets_have_the_names_keys_and_labels_ibio_and_siteconfig_read() {
    let d = IdentityData {
        kubeconfig: b"kubeconfig bytes",
        kubeconfig_from: "from sites/a17/auth/kubeconfig".into(),
        password: "abcde-fghij",
        password_from: "from sites/a17/auth/kubeadmin-password".into(),
        manifest_json: b"{}",
        manifest_from: "from sites/a17/imagebasedconfig.iso".into(),
    };
    let secrets = identity_secrets("sno-a17", &d, SecretData::Values).unwrap();
    let docs: Vec<Value> = secrets
        .iter()
        .map(|s| serde_yaml_ng::from_str(s.expose()).unwrap())
        .collect();
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "sno-a17-admin-kubeconfig",
            "sno-a17-admin-password",
            "sno-a17-seed-reconfiguration"
        ]
    );
    let decode = |v: &Value| openssl::base64::decode_block(v.as_str().unwrap()).unwrap();
    assert_eq!(decode(&docs[0]["data"]["kubeconfig"]), b"kubeconfig bytes");
    assert_eq!(decode(&docs[1]["data"]["username"]), b"kubeadmin");
    assert_eq!(decode(&docs[1]["data"]["password"]), b"abcde-fghij");
    assert_eq!(decode(&docs[2]["data"]["manifest.json"]), b"{}");
    for (doc, type_) in docs
        .iter()
        .zip(["kubeconfig", "kubeadmincreds", "manifest.json"])
    {
        assert_eq!(doc["metadata"]["namespace"], "sno-a17");
        assert_eq!(doc["type"], "Opaque");
        let labels = &doc["metadata"]["labels"];
        assert_eq!(labels[PRESERVE_LABEL], PRESERVE_CLUSTER_IDENTITY);
        assert_eq!(labels["hive.openshift.io/secret-type"], type_);
        assert_eq!(
            labels["hive.openshift.io/cluster-deployment-name"],
            "sno-a17"
        );
    }
    let templates = identity_secrets("sno-a17", &d, SecretData::Templates).unwrap();
    assert!(
        templates[0]
            .expose()
            .contains("from sites/a17/auth/kubeconfig")
    );
    assert!(!templates[1].expose().contains("abcde-fghij"));
}
