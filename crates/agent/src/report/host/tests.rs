use super::*;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

#[test]
fn identity_is_read_under_the_root() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(read_identity(d.path()), HostIdentity::default());
    for (p, v) in [
        ("proc/sys/kernel/hostname", "sno-a17\n"),
        (
            "sys/class/dmi/id/product_uuid",
            "27946B59-9E44-4FA7-8E91-F3527A1EF094\n",
        ),
        ("proc/sys/kernel/random/boot_id", "b00t\n"),
    ] {
        let path = d.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, v).unwrap();
    }
    assert_eq!(
        read_identity(d.path()),
        HostIdentity {
            hostname: "sno-a17".into(),
            product_uuid: Some("27946b59-9e44-4fa7-8e91-f3527a1ef094".into()),
            boot_id: Some("b00t".into()),
        }
    );
}

#[test]
fn settings_errors_name_the_file_not_the_token() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("r.json");
    assert!(load_report_config(&p).unwrap().is_none());
    std::fs::write(&p, format!(r#"{{"url":"x","token":"{TOKEN}"}}"#)).unwrap();
    let err = format!("{:#}", load_report_config(&p).unwrap_err());
    assert!(err.contains("is not a report settings file"), "{err}");
    assert!(!err.contains(TOKEN), "{err}");
}

#[test]
fn a_missing_journalctl_is_one_line_saying_so() {
    let lines = journal_tail("/nonexistent/journalctl", "x.service");
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with("(the journal could not be read: starting `/nonexistent/journalctl"),
        "{}",
        lines[0]
    );
}
