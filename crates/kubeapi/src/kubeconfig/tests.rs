use super::*;
use openssl::base64::encode_block;

const KEY_MARKER: &str = "MARKER-KEY-BYTES";

/// A kubeconfig of the shape client-go writes, two contexts, the current one second.
fn two_contexts() -> String {
    let b = |s: &str| encode_block(s.as_bytes());
    format!(
        "apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: {ca_other}
    server: https://other.example.com:6443
  name: other
- cluster:
    certificate-authority-data: {ca}
    server: https://api.sno.example.com:6443
    extensions: []
  name: sno
contexts:
- context: {{cluster: other, user: other}}
  name: other
- context:
    cluster: sno
    user: admin
    namespace: default
  name: admin
current-context: admin
preferences: {{}}
users:
- name: other
  user:
    token: other-token
- name: admin
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
",
        ca_other = b("OTHER CA"),
        ca = b("SNO CA"),
        cert = b("CERT"),
        key = b(KEY_MARKER),
    )
}

fn inline<T: Clone>(m: &Material<T>) -> T {
    match m {
        Material::Inline(v) => v.clone(),
        Material::File(p) => panic!("expected inline, got file {}", p.display()),
    }
}

#[test]
fn current_context_picks_cluster_and_user() {
    let s = parse_kubeconfig(&two_contexts()).unwrap();
    assert_eq!(s.context, "admin");
    assert_eq!(s.server.as_str(), "https://api.sno.example.com:6443/");
    assert_eq!(inline(s.ca.as_ref().unwrap()), b"SNO CA");
    let SelectedAuth::Certificate { cert, key } = &s.auth else {
        panic!("expected a client certificate: {:?}", s.auth);
    };
    assert_eq!(inline(cert), b"CERT");
    assert_eq!(inline(key).expose(), KEY_MARKER.as_bytes());
    let shown = format!("{s:?}");
    assert!(!shown.contains("MARKER"), "{shown}");
}

#[test]
fn without_current_context_the_only_context_is_used() {
    let text = "clusters: [{name: c, cluster: {server: 'https://10.0.0.5:6443'}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t0k}}]
";
    let s = parse_kubeconfig(text).unwrap();
    assert_eq!(s.context, "x");
    assert!(s.ca.is_none(), "no CA: the system trust store");
    let SelectedAuth::Token(t) = &s.auth else {
        panic!("{:?}", s.auth)
    };
    assert_eq!(inline(t).expose_str(), "t0k");
}

#[test]
fn files_are_read_relative_to_the_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("pki")).unwrap();
    std::fs::write(dir.path().join("pki/ca.crt"), "CA FILE").unwrap();
    std::fs::write(dir.path().join("pki/admin.crt"), "CERT FILE").unwrap();
    std::fs::write(dir.path().join("pki/admin.key"), "KEY FILE").unwrap();
    let text = "clusters: [{name: c, cluster: {server: 'https://h:6443', certificate-authority: pki/ca.crt}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
users: [{name: u, user: {client-certificate: pki/admin.crt, client-key: pki/admin.key}}]
";
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, text).unwrap();
    let a = load_kubeconfig(&path).unwrap();
    assert_eq!(a.ca_pem.as_deref(), Some(&b"CA FILE"[..]));
    let ClientAuth::Certificate { cert_pem, key_pem } = &a.auth else {
        panic!("{:?}", a.auth)
    };
    assert_eq!(cert_pem, b"CERT FILE");
    assert_eq!(key_pem.expose(), b"KEY FILE");

    std::fs::remove_file(dir.path().join("pki/admin.key")).unwrap();
    let e = format!("{:#}", load_kubeconfig(&path).unwrap_err());
    assert!(
        e.contains("client-key: reading") && e.contains("admin.key"),
        "{e}"
    );
}

#[test]
fn token_file_is_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tok"), "sha256~abc\n").unwrap();
    let text = "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {tokenFile: tok}}]
";
    let path = dir.path().join("kc");
    std::fs::write(&path, text).unwrap();
    let ClientAuth::Token(t) = load_kubeconfig(&path).unwrap().auth else {
        panic!("token expected")
    };
    assert_eq!(t.expose_str(), "sha256~abc");
}

/// What cannot be honoured is refused, naming the entry and the field.
#[test]
fn refusals_name_the_entry_and_field() {
    let base = "contexts: [{name: x, context: {cluster: c, user: u}}]\n";
    let cluster = |extra: &str| {
        format!("{base}clusters: [{{name: c, cluster: {{server: 'https://h:6443'{extra}}}}}]\n")
    };
    let users = "users: [{name: u, user: {token: t}}]\n";
    let cases: Vec<(String, &str)> = vec![
        (
            format!("{}{users}", cluster(", insecure-skip-tls-verify: true")),
            "clusters \"c\": insecure-skip-tls-verify is set: not supported",
        ),
        (
            format!("{}{users}", cluster(", tls-server-name: api")),
            "clusters \"c\": tls-server-name is set",
        ),
        (
            format!("{}{users}", cluster(", proxy-url: 'http://p:3128'")),
            "clusters \"c\": proxy-url is set",
        ),
        (
            format!("{}{users}", cluster(", certificate-authority-data: '%%%'")),
            "clusters \"c\": certificate-authority-data: not base64",
        ),
        (
            format!("{base}clusters: [{{name: c, cluster: {{server: 'http://h:6443'}}}}]\n{users}"),
            "server \"http://h:6443\": not an https:// URL",
        ),
        (
            format!(
                "{}users: [{{name: u, user: {{exec: {{command: oc}}}}}}]\n",
                cluster("")
            ),
            "users \"u\": exec: not supported",
        ),
        (
            format!(
                "{}users: [{{name: u, user: {{auth-provider: {{name: gcp}}}}}}]\n",
                cluster("")
            ),
            "users \"u\": auth-provider: not supported",
        ),
        (
            format!(
                "{}users: [{{name: u, user: {{username: a, password: b}}}}]\n",
                cluster("")
            ),
            "users \"u\": username: not supported",
        ),
        (
            format!("{}users: [{{name: u, user: {{}}}}]\n", cluster("")),
            "users \"u\": no client certificate and no token",
        ),
        (
            format!(
                "{}users: [{{name: u, user: {{client-certificate-data: Q0VSVA==}}}}]\n",
                cluster("")
            ),
            "users \"u\": client-certificate without client-key",
        ),
        (
            format!("{}users: [{{name: v, user: {{token: t}}}}]\n", cluster("")),
            "contexts \"x\": user \"u\" is not in users",
        ),
        (
            format!("{base}clusters: []\n{users}"),
            "contexts \"x\": cluster \"c\" is not in clusters",
        ),
        (
            format!("{}{users}current-context: nope\n", cluster("")),
            "current-context: \"nope\" is not in contexts",
        ),
    ];
    for (text, want) in cases {
        let got = parse_kubeconfig(&text).map(|_| ()).unwrap_err().to_string();
        assert!(got.contains(want), "want {want:?}, got {got:?}\n{text}");
    }
}

/// A secret that does not decode is named, never shown.
#[test]
fn secret_fields_are_never_quoted() {
    let text = two_contexts().replace(
        &format!("client-key-data: {}", encode_block(KEY_MARKER.as_bytes())),
        &format!("client-key-data: '{KEY_MARKER}!!'"),
    );
    let e = parse_kubeconfig(&text).unwrap_err().to_string();
    assert!(e.contains("client-key-data: not base64"), "{e}");
    assert!(!e.contains("MARKER"), "{e}");
    let text = "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: 918273645}}]
";
    let e = parse_kubeconfig(text).unwrap_err().to_string();
    assert!(e.contains("not a string"), "{e}");
    assert!(!e.contains("918273645"), "{e}");
}

#[test]
fn yaml_errors_carry_their_position() {
    let e = parse_kubeconfig("clusters: [\n  {name: c\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("line"), "{e}");
}
