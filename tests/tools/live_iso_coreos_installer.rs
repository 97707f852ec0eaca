//! `live_iso` checked against coreos-installer, the tool that defines the embed-area contract:
//! on every synthetic layout and on every upstream fixture ISO (when `../shared/fixtures/coreos-iso`
//! exists), coreos-installer must find the areas where we do, show the config and kargs we
//! embedded byte for byte, and we must decode what it embedded. Without the tool the tests fail.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use ibi::iso9660::IsoReader;
use ibi::live_iso::synthetic::SyntheticIso;
use ibi::live_iso::{
    EmbedArea, KargsAreas, LiveIsoError, Patch, copy_with_patches, decode_ignition,
    encode_ignition, encode_kargs, find_ignition_area, find_kargs, is_customized, read_area,
    read_kargs,
};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tempfile::TempDir;

/// Byte-exactness matters: no trailing newline, non-ASCII, JSON escapes.
const CONFIG: &[u8] = "{\"ignition\":{\"version\":\"3.2.0\"},\"passwd\":{\"users\":[{\"name\":\"core\",\"sshAuthorizedKeys\":[\"ssh-ed25519 AAAAC3Nz\\u00e9 ibi-t\u{e9}st\"]}]}}".as_bytes();
const NEW_KARGS: &str = "console=ttyS0,115200n8 ip=dhcp ibi.test=1";

/// The coreos-installer binary: `COREOS_INSTALLER` (as the benchmarks take it), else the one on PATH;
/// the test fails ([`common::tool`]) without it.
fn coreos_installer(test: &str) -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("COREOS_INSTALLER") {
        return Some(bin.into());
    }
    common::tool("coreos-installer", test).then(|| PathBuf::from("coreos-installer"))
}

fn run(bin: &Path, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

fn stdout_of(bin: &Path, args: &[&str]) -> Vec<u8> {
    let out = run(bin, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} {args:?} failed: {stderr}",
        bin.display()
    );
    out.stdout
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/coreos-iso")
}

/// Every image to test: the synthetic layouts, then the decompressed fixtures.
fn images(dir: &TempDir) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for s in SyntheticIso::all() {
        let path = dir.path().join(format!("synthetic-{}.iso", s.name()));
        s.write(File::create(&path).unwrap()).unwrap();
        out.push((format!("synthetic {}", s.name()), path));
    }
    let Ok(entries) = std::fs::read_dir(fixture_dir()) else {
        let _ = writeln!(
            std::io::stderr(),
            "note: no fixture folder at {}; synthetic images only",
            fixture_dir().display()
        );
        return out;
    };
    let mut fixtures: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    fixtures.retain(|p| p.to_string_lossy().ends_with(".iso.xz"));
    fixtures.sort();
    assert!(
        !fixtures.is_empty(),
        "{} holds no *.iso.xz",
        fixture_dir().display()
    );
    for xz in fixtures {
        let name = xz
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".xz")
            .to_string();
        let path = dir.path().join(&name);
        let mut dec = liblzma::read::XzDecoder::new(File::open(&xz).unwrap());
        std::io::copy(&mut dec, &mut File::create(&path).unwrap()).unwrap();
        out.push((name, path));
    }
    out
}

/// Our view of an image: the Ignition area and karg slots, or `NotCoreOs`.
fn locate(path: &Path) -> Result<(EmbedArea, Option<KargsAreas>), LiveIsoError> {
    let mut iso = IsoReader::open(File::open(path).unwrap()).unwrap();
    let area = find_ignition_area(&mut iso)?;
    Ok((area, find_kargs(&mut iso)?))
}

/// The images that are CoreOS ISOs, with our view of them; any error but `NotCoreOs` fails.
fn coreos_images(dir: &TempDir) -> Vec<(String, PathBuf, EmbedArea, Option<KargsAreas>)> {
    let mut out = Vec::new();
    for (name, path) in images(dir) {
        match locate(&path) {
            Ok((area, kargs)) => out.push((name, path, area, kargs)),
            Err(LiveIsoError::NotCoreOs) => {}
            Err(e) => panic!("{name}: {e}"),
        }
    }
    out
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap()
}

/// Compares our kargs view with `dev show iso --kargs` (null when the image has no slots).
fn assert_same_kargs(name: &str, ours: &Option<KargsAreas>, theirs: &serde_json::Value) {
    let Some(k) = ours else {
        assert!(
            theirs.is_null(),
            "{name}: coreos-installer sees kargs: {theirs}"
        );
        return;
    };
    assert_eq!(theirs["length"], k.size, "{name}");
    assert_eq!(theirs["default"], k.default.as_str(), "{name}");
    let slots = theirs["kargs"].as_array().unwrap();
    assert_eq!(slots.len(), k.slots.len(), "{name}");
    for (slot, theirs) in k.slots.iter().zip(slots) {
        assert_eq!(theirs["offset"], slot.offset, "{name}");
        let byte =
            |key: &str, default: u8| theirs[key].as_str().map_or(default, |s| s.as_bytes()[0]);
        assert_eq!(
            (byte("pad", b'#'), byte("end", b'\n')),
            (slot.pad, slot.end),
            "{name}"
        );
    }
}

/// Every byte of `a` and `b` outside `patches` is equal, and the sizes match.
fn assert_same_outside(name: &str, a: &Path, b: &Path, patches: &[Patch]) {
    let (a, b) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert_eq!(a.len(), b.len(), "{name}: size changed");
    let inside = |i: u64| {
        patches
            .iter()
            .any(|p| i >= p.offset && i < p.offset + p.data.len() as u64)
    };
    let stray = (0..a.len()).find(|&i| a[i] != b[i] && !inside(i as u64));
    assert_eq!(stray, None, "{name}: byte changed outside the embed areas");
}

/// Writes `src` with our config and kargs to `dst`; returns the patches.
fn customize(src: &Path, dst: &Path, area: EmbedArea, kargs: &Option<KargsAreas>) -> Vec<Patch> {
    let mut patches = vec![Patch {
        offset: area.offset,
        data: encode_ignition(CONFIG, area.length).unwrap(),
    }];
    if let Some(k) = kargs {
        patches.extend(encode_kargs(k, NEW_KARGS).unwrap());
    }
    let (from, to) = (File::open(src).unwrap(), File::create(dst).unwrap());
    let mut last = 0;
    copy_with_patches(&from, &to, &patches, &mut |n| last = n).unwrap();
    assert_eq!(
        last,
        from.metadata().unwrap().len(),
        "progress reaches the full size"
    );
    patches
}

/// `iso kargs show` (and `--default`) on `iso` agree with us; without slots it fails.
fn assert_kargs_shown(bin: &Path, name: &str, iso: &Path, kargs: &Option<KargsAreas>) {
    let path = iso.to_str().unwrap();
    let show = |extra: &[&str]| {
        let args = [&["iso", "kargs", "show"], extra, &[path]].concat();
        String::from_utf8(stdout_of(bin, &args)).unwrap()
    };
    let Some(k) = kargs else {
        let out = run(bin, &["iso", "kargs", "show", path]);
        assert!(
            !out.status.success(),
            "{name}: kargs unexpectedly supported"
        );
        return;
    };
    let ours = read_kargs(&mut File::open(iso).unwrap(), k).unwrap();
    assert_eq!(show(&[]).trim_end(), ours, "{name}");
    assert_eq!(show(&["--default"]).trim_end(), k.default, "{name}");
}

/// Runs coreos-installer `args` writing `-o out` from `src`, replacing any earlier `out`.
fn their_output(bin: &Path, args: &[&str], src: &Path, out: &Path) -> File {
    let _ = std::fs::remove_file(out);
    let paths = [out.to_str().unwrap(), src.to_str().unwrap()];
    stdout_of(bin, &[args, &["-o", paths[0], paths[1]]].concat());
    File::open(out).unwrap()
}

#[test]
fn areas_are_where_coreos_installer_finds_them() {
    let Some(bin) = coreos_installer("areas_are_where_coreos_installer_finds_them") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, path) in images(&dir) {
        let p = path.to_str().unwrap();
        let Ok((area, kargs)) = locate(&path) else {
            let out = run(&bin, &["dev", "show", "iso", "--ignition", p]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("Unrecognized CoreOS ISO image."),
                "{name}: {stderr}"
            );
            continue;
        };
        let theirs = json(&stdout_of(&bin, &["dev", "show", "iso", "--ignition", p]));
        assert_eq!(
            (theirs["offset"].as_u64(), theirs["length"].as_u64()),
            (Some(area.offset), Some(area.length)),
            "{name}"
        );
        let theirs = json(&stdout_of(&bin, &["dev", "show", "iso", "--kargs", p]));
        assert_same_kargs(&name, &kargs, &theirs);
    }
}

#[test]
fn coreos_installer_shows_what_we_embed() {
    let Some(bin) = coreos_installer("coreos_installer_shows_what_we_embed") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, src, area, kargs) in coreos_images(&dir) {
        let dst = dir.path().join("out.iso");
        let patches = customize(&src, &dst, area, &kargs);
        let shown = stdout_of(&bin, &["iso", "ignition", "show", dst.to_str().unwrap()]);
        assert_eq!(shown, CONFIG, "{name}");
        let mut out = File::open(&dst).unwrap();
        assert!(is_customized(&mut out, &area).unwrap(), "{name}");
        if let Some(k) = &kargs {
            assert_eq!(read_kargs(&mut out, k).unwrap(), NEW_KARGS, "{name}");
        }
        assert_kargs_shown(&bin, &name, &dst, &kargs);
        assert_same_outside(&name, &src, &dst, &patches);
    }
}

#[test]
fn we_read_what_coreos_installer_embeds() {
    let Some(bin) = coreos_installer("we_read_what_coreos_installer_embeds") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (config, out) = (dir.path().join("config.ign"), dir.path().join("theirs.iso"));
    std::fs::write(&config, CONFIG).unwrap();
    let embed = ["iso", "ignition", "embed", "-i", config.to_str().unwrap()];
    for (name, src, area, kargs) in coreos_images(&dir) {
        let bytes = read_area(&mut their_output(&bin, &embed, &src, &out), &area).unwrap();
        let decoded = decode_ignition(&bytes).unwrap();
        assert_eq!(decoded.as_deref(), Some(CONFIG), "{name}");
        let Some(k) = kargs else { continue };
        let before = read_kargs(&mut File::open(&src).unwrap(), &k).unwrap();
        let modify = ["iso", "kargs", "modify", "-a", "ibi.added=1"];
        let modified = read_kargs(&mut their_output(&bin, &modify, &src, &out), &k).unwrap();
        assert_eq!(modified, format!("{before} ibi.added=1"), "{name}");
    }
}

#[test]
fn non_coreos_images_are_refused_by_both() {
    let Some(bin) = coreos_installer("non_coreos_images_are_refused_by_both") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain.iso");
    let mut b = ibi::iso9660::IsoBuilder::new();
    b.add_file("images/pxeboot/vmlinuz", b"the kernel".to_vec(), 0o644)
        .unwrap();
    let opts = ibi::iso9660::WriteOptions {
        volume_id: "plain".into(),
        timestamp: 0,
    };
    b.write(&opts, File::create(&path).unwrap()).unwrap();
    assert!(matches!(locate(&path), Err(LiveIsoError::NotCoreOs)));
    let out = run(&bin, &["iso", "ignition", "show", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("Unrecognized CoreOS ISO image."),
        "{stderr}"
    );
}

/// The kernel's initramfs decoder accepts only CRC32 (or no) checks; xz itself must agree that
/// this is what we write, and that the zero fill is valid stream padding.
#[test]
fn xz_cli_sees_a_crc32_stream_with_valid_padding() {
    if !common::tool("xz", "xz_cli_sees_a_crc32_stream_with_valid_padding") {
        return;
    }
    let xz = PathBuf::from("xz");
    let dir = tempfile::tempdir().unwrap();
    let area = encode_ignition(CONFIG, 262_144).unwrap();
    let end = area.iter().rposition(|&b| b != 0).unwrap() + 1;
    let (stream, padded) = (dir.path().join("stream.xz"), dir.path().join("padded.xz"));
    std::fs::write(&stream, &area[..end]).unwrap();
    std::fs::write(&padded, &area).unwrap();
    let list = stdout_of(&xz, &["--robot", "--list", stream.to_str().unwrap()]);
    let list = String::from_utf8(list).unwrap();
    let checks: Vec<&str> = list
        .lines()
        .filter(|l| l.starts_with("totals\t"))
        .map(|l| l.split('\t').nth(6).unwrap_or(""))
        .collect();
    assert_eq!(checks, ["CRC32"], "{list}");
    let out = Command::new(&xz)
        .args(["--test", padded.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
