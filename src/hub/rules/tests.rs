use serde_json::{Value, json};

use super::*;

/// A ClusterInstance as `objects::cluster_instance` writes it for one site.
fn cluster_instance() -> Value {
    json!({
        "apiVersion": "siteconfig.open-cluster-management.io/v1alpha1",
        "kind": "ClusterInstance",
        "metadata": {"name": "sno-a17", "namespace": "sno-a17"},
        "spec": {
            "clusterName": "sno-a17",
            "baseDomain": "edge.example.com",
            "clusterType": "SNO",
            "clusterImageSetNameRef": "ibi-4.18.0",
            "pullSecretRef": {"name": "pull-secret"},
            "templateRefs": [{"name": "ibi-cluster-templates-v1", "namespace": "open-cluster-management"}],
            "machineNetwork": [{"cidr": "192.168.122.0/23"}],
            "proxy": {"httpProxy": "http://proxy:3128"},
            "extraManifestsRefs": [{"name": "extra-manifests"}],
            "nodes": [{
                "hostName": "sno-a17",
                "role": "master",
                "bmcAddress": "redfish-virtualmedia+https://10.0.0.9/redfish/v1/Systems/1",
                "bmcCredentialsName": {"name": "sno-a17-bmc-secret"},
                "bootMACAddress": "52:54:00:aa:17:01",
                "bootMode": "UEFI",
                "rootDeviceHints": {"deviceName": "/dev/sda", "minSizeGigabytes": 100, "rotational": false},
                "templateRefs": [{"name": "ibi-node-templates-v1", "namespace": "open-cluster-management"}],
                "nodeNetwork": {
                    "interfaces": [{"name": "eth0", "macAddress": "52:54:00:aa:17:01"}],
                    "config": {"interfaces": []},
                },
            }],
        },
    })
}

/// `doc` with the value at `pointer` replaced (`None`: removed).
fn with(mut doc: Value, pointer: &str, value: Option<Value>) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let p = doc.pointer_mut(parent).unwrap();
    match (value, p) {
        (Some(v), Value::Array(a)) => a[key.parse::<usize>().unwrap()] = v,
        (Some(v), p) => p[key] = v,
        (None, Value::Object(m)) => {
            m.remove(key);
        }
        (None, _) => panic!("remove from a non-object"),
    }
    doc
}

#[test]
fn the_cluster_instance_ibi_writes_passes() {
    assert_eq!(check_object(&cluster_instance()), Vec::<String>::new());
}

#[test]
fn each_cluster_instance_rule_catches_its_violation() {
    let cases: &[(&str, Option<Value>, &str)] = &[
        ("/spec/baseDomain", None, "spec.baseDomain: required"),
        (
            "/spec/clusterImageSetNameRef",
            Some(json!("")),
            "spec.clusterImageSetNameRef: must not be empty",
        ),
        (
            "/spec/pullSecretRef",
            None,
            "spec.pullSecretRef.name: required",
        ),
        (
            "/spec/clusterType",
            Some(json!("Single")),
            "spec.clusterType",
        ),
        (
            "/spec/clusterName",
            Some(json!("Sno_A17")),
            "not a valid name",
        ),
        (
            "/spec/templateRefs",
            Some(json!([])),
            "spec.templateRefs: required",
        ),
        (
            "/spec/templateRefs/0/namespace",
            None,
            "spec.templateRefs[0].namespace: required",
        ),
        (
            "/spec/templateRefs/0/name",
            Some(json!("other")),
            "does not name SiteConfig's ibi-cluster-templates-v1",
        ),
        (
            "/metadata/namespace",
            Some(json!("default")),
            "metadata.namespace: must be the cluster name",
        ),
        (
            "/spec/machineNetwork",
            None,
            "spec.proxy: needs spec.machineNetwork",
        ),
        (
            "/spec/machineNetwork/0/cidr",
            None,
            "spec.machineNetwork[0].cidr: required",
        ),
        (
            "/spec/extraManifestsRefs/0/name",
            Some(json!("")),
            "spec.extraManifestsRefs[0].name: required",
        ),
        ("/spec/nodes", Some(json!([])), "spec.nodes: required"),
        (
            "/spec/nodes/0/role",
            Some(json!("worker")),
            "SNO needs exactly one master, found 0",
        ),
        (
            "/spec/nodes/0/role",
            Some(json!("boss")),
            "spec.nodes[0].role",
        ),
        (
            "/spec/nodes/0/hostName",
            Some(json!("SNO_a17")),
            "spec.nodes[0].hostName",
        ),
        (
            "/spec/nodes/0/bmcAddress",
            None,
            "spec.nodes[0].bmcAddress: required",
        ),
        (
            "/spec/nodes/0/bmcCredentialsName",
            Some(json!({})),
            "spec.nodes[0].bmcCredentialsName.name: required",
        ),
        (
            "/spec/nodes/0/bootMACAddress",
            Some(json!("52:54:00:aa:17")),
            "does not match xx:xx:xx:xx:xx:xx",
        ),
        (
            "/spec/nodes/0/bootMode",
            Some(json!("BIOS")),
            "spec.nodes[0].bootMode",
        ),
        (
            "/spec/nodes/0/automatedCleaningMode",
            Some(json!("full")),
            "automatedCleaningMode",
        ),
        (
            "/spec/nodes/0/templateRefs",
            None,
            "spec.nodes[0].templateRefs: required",
        ),
        (
            "/spec/nodes/0/rootDeviceHints/minSizeGigabytes",
            Some(json!("100")),
            "rootDeviceHints.minSizeGigabytes",
        ),
        (
            "/spec/nodes/0/rootDeviceHints/diskName",
            Some(json!("sda")),
            "rootDeviceHints.diskName",
        ),
        (
            "/spec/nodes/0/nodeNetwork/config",
            Some(json!("eth0: up")),
            "nodeNetwork.config",
        ),
        (
            "/spec/nodes/0/nodeNetwork/interfaces/0/macAddress",
            Some(json!("x")),
            "nodeNetwork.interfaces[0]",
        ),
        // Issue 34 item 1: the CRD's minItems, and any field it does not know.
        (
            "/spec/nodes/0/nodeNetwork/interfaces",
            Some(json!([])),
            "spec.nodes[0].nodeNetwork.interfaces: the ClusterInstance CRD wants at least 1 item(s)",
        ),
        (
            "/spec/nodes/0/nodeLabel",
            Some(json!({"a": "b"})),
            "spec.nodes[0].nodeLabel: not a field of the ClusterInstance CRD",
        ),
        (
            "/spec/apiVIPs",
            Some(json!(["10.0.0.1", "10.0.0.2", "10.0.0.3"])),
            "spec.apiVIPs: the ClusterInstance CRD allows at most 2 item(s)",
        ),
        (
            "/spec/nodes/0/ironicInspect",
            Some(json!("enabled")),
            "spec.nodes[0].ironicInspect",
        ),
    ];
    for (pointer, value, want) in cases {
        let errors = check_object(&with(cluster_instance(), pointer, value.clone()));
        assert!(
            errors.iter().any(|e| e.contains(want)),
            "{pointer} = {value:?}: want {want:?}, got {errors:?}"
        );
    }
}

#[test]
fn config_maps_secrets_and_image_sets_follow_their_rules() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "extra-manifests", "namespace": "sno-a17"}, "data": {"a.yaml": "x: 1"}});
    assert_eq!(check_object(&cm), Vec::<String>::new());
    assert!(
        check_object(&with(cm.clone(), "/data/a.yaml", Some(json!(1))))[0]
            .contains("must be a string")
    );
    assert!(check_object(&with(cm.clone(), "/data", None))[0].contains("data: required"));
    assert!(
        check_object(&with(cm, "/metadata/namespace", None))[0]
            .contains("metadata.namespace: required")
    );
    let ps = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "pull-secret", "namespace": "sno-a17"}, "data": {"auths": ""}});
    assert!(check_object(&ps)[0].contains("needs .dockerconfigjson"));
    let cis = json!({"apiVersion": "hive.openshift.io/v1", "kind": "ClusterImageSet",
        "metadata": {"name": "ibi-4.18.0"}, "spec": {}});
    assert_eq!(check_object(&cis), ["spec.releaseImage: required"]);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}});
    assert!(check_object(&ns)[0].contains("not a valid name"));
}

#[test]
fn pull_secret_entries_need_auth_with_exactly_one_colon() {
    let colons = |s: &str| user_password_colons(&openssl::base64::encode_block(s.as_bytes()));
    assert_eq!(colons("user:pass"), Some(1));
    assert_eq!(colons("user:pa:ss"), Some(2));
    assert_eq!(colons(":pass"), None);
    assert_eq!(colons("token"), None);
    assert_eq!(user_password_colons("not base64!"), None);
}

#[test]
fn extra_manifest_names_a_hub_refuses_are_findings() {
    let m = |name: &str| ExtraManifest {
        name: name.into(),
        data: b"x: 1".to_vec(),
    };
    let manifests = [
        m("01-ok.yaml"),
        m("a-name-that-is-much-too-long-for-it.yaml"),
        m("invoker-cm.yaml"),
        m("image-digest-mirror-set.json"),
        m("has space.yaml"),
    ];
    let f = manifest_findings(
        "extra-manifests",
        &manifests,
        Some("image-digest-mirror-set.json"),
    );
    let files: Vec<&str> = f.iter().map(|f| f.file.as_str()).collect();
    assert_eq!(
        files,
        [
            "extra-manifests/a-name-that-is-much-too-long-for-it.yaml",
            "extra-manifests/invoker-cm.yaml",
            "extra-manifests/image-digest-mirror-set.json",
            "extra-manifests/has space.yaml",
        ]
    );
    assert!(f[0].message.contains("40 characters"), "{}", f[0].message);
}
