//! Writes the starting corpus of every fuzz target into `fuzz/corpus/<target>/` (or the directory
//! given as the only argument): valid images from ibi's own ISO writer and synthetic live-ISO
//! generator, Ignition areas encoded the ways the producers encode them, the example inputs of
//! `seed-fixtures/`, and the fixture seed's OCI layout. Deterministic, so a corpus can always be
//! rebuilt; nothing here is committed but the generator.
//!
//! cargo run --manifest-path fuzz/Cargo.toml --bin make-seed-corpus

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use ibi::iso9660::{IsoBuilder, IsoReader, WriteOptions};
use ibi::live_iso::synthetic::SyntheticIso;
use ibi_fuzz::PART_SEPARATOR;

/// Named inputs of one target: `seed-<name>` files.
type Seeds = Vec<(String, Vec<u8>)>;

fn main() {
    let out = std::env::args_os().nth(1).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"),
        PathBuf::from,
    );
    if let Err(e) = run(&out) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(out: &Path) -> Result<()> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let targets: [(&str, Seeds); 7] = [
        ("iso9660_reader", iso_seeds()?),
        ("live_iso_embed", live_iso_seeds()?),
        ("kargs_json", descriptor_seeds()?),
        ("cpio_reader", ignition_area_seeds()?),
        ("config_decoders", config_seeds(&repo)?),
        ("seed_manifest", seed_manifest_seeds(&repo)?),
        ("agent_config", agent_config_seeds()),
    ];
    for (target, seeds) in targets {
        let dir = out.join(target);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for (name, bytes) in &seeds {
            let path = dir.join(format!("seed-{name}"));
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        }
        println!("{}: {} seeds", dir.display(), seeds.len());
    }
    Ok(())
}

fn write_iso(b: &IsoBuilder) -> Result<Vec<u8>> {
    let opts = WriteOptions {
        volume_id: "fuzz-seed".to_string(),
        timestamp: 1_700_000_000,
    };
    let mut out = Vec::new();
    b.write(&opts, &mut out).context("writing a seed ISO")?;
    Ok(out)
}

/// Small images that reach every reader path: nested directories, a name long enough for a
/// continuation area, an empty file and directory, a deep tree.
fn iso_seeds() -> Result<Seeds> {
    let long = format!("{}.yaml", "l".repeat(240));
    let deep = (0..20)
        .map(|i| format!("d{i}"))
        .collect::<Vec<_>>()
        .join("/");
    // (name, files, empty directories)
    let trees: [(&str, Seeds, &[&str]); 4] = [
        ("empty", vec![], &[]),
        (
            "tree",
            vec![
                ("README.md".into(), b"hello".to_vec()),
                ("etc/config.yaml".into(), b"a: 1\n".to_vec()),
                ("etc/empty".into(), vec![]),
                ("etc/deep/file.bin".into(), vec![7; 3000]),
            ],
            &["var/empty-dir"],
        ),
        (
            "long-name",
            vec![(format!("etc/{long}"), b"x".to_vec())],
            &[],
        ),
        ("deep", vec![(format!("{deep}/f"), b"x".to_vec())], &[]),
    ];
    let mut seeds = Vec::new();
    for (name, files, dirs) in trees {
        let mut b = IsoBuilder::new();
        for d in dirs {
            b.add_dir(d, 0o755)
                .with_context(|| format!("adding directory {d}"))?;
        }
        for (path, data) in files {
            b.add_file(&path, data, 0o644)
                .with_context(|| format!("adding {path}"))?;
        }
        seeds.push((name.to_string(), write_iso(&b)?));
    }
    Ok(seeds)
}

/// Mode byte 0 + every synthetic layout; mode byte 1 + the same files as separated parts, so
/// mutations land on the descriptors and slots rather than on ISO 9660 structures.
fn live_iso_seeds() -> Result<Seeds> {
    let mut seeds = Vec::new();
    for iso in SyntheticIso::all() {
        let image = iso
            .to_vec()
            .with_context(|| format!("building synthetic ISO {}", iso.name()))?;
        let mut whole = vec![0u8];
        whole.extend_from_slice(&image);
        seeds.push((format!("whole-{}", iso.name()), whole));
        seeds.push((format!("parts-{}", iso.name()), live_iso_parts(&image)?));
    }
    Ok(seeds)
}

/// Mode byte 1 + the live-ISO files of `image`, the Ignition image cut to 8 KiB.
fn live_iso_parts(image: &[u8]) -> Result<Vec<u8>> {
    let mut iso =
        IsoReader::open(std::io::Cursor::new(image)).context("opening a synthetic ISO")?;
    let mut out = vec![1u8];
    for (i, path) in ibi_fuzz::LIVE_ISO_FILES.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(PART_SEPARATOR);
        }
        let data = match iso.find_iso(&path.to_ascii_uppercase().replace(".JSON", ".JSO")) {
            Ok(entry) => iso
                .read_entry(&entry)
                .with_context(|| format!("reading {path}"))?,
            Err(_) => continue,
        };
        // ignition.img is all zeros; cdboot.img keeps its size, since both descriptors of the
        // s390x layout point deep into it.
        let keep = if path.ends_with("ignition.img") {
            8192
        } else {
            data.len()
        };
        out.extend_from_slice(&data[..data.len().min(keep)]);
    }
    Ok(out)
}

/// The descriptors of the synthetic images and a few hand-written variants.
fn descriptor_seeds() -> Result<Seeds> {
    let mut seeds = Vec::new();
    for iso in SyntheticIso::all() {
        let image = iso
            .to_vec()
            .with_context(|| format!("building synthetic ISO {}", iso.name()))?;
        let mut r =
            IsoReader::open(std::io::Cursor::new(&image[..])).context("opening a synthetic ISO")?;
        for name in ["coreos/kargs.json", "coreos/igninfo.json"] {
            if let Ok(bytes) = r.read_file(name) {
                seeds.push((format!("{}-{}", iso.name(), name.replace('/', "-")), bytes));
            }
        }
    }
    let hand = [
        ("igninfo-min", r#"{"file":"images/ignition.img"}"#),
        (
            "kargs-nul-fill",
            r#"{"default":"a=1","files":[{"path":"images/cdboot.img","offset":66688,"pad":"\u0000","end":"\u0000"}],"size":896}"#,
        ),
    ];
    seeds.extend(
        hand.iter()
            .map(|(n, s)| (n.to_string(), s.as_bytes().to_vec())),
    );
    Ok(seeds)
}

const CONFIG_IGN: &[u8] = br#"{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA"]}]}}"#;

/// Ignition areas as coreos-installer (xz), openshift-install (gzip) and by hand (plain cpio)
/// write them, plus concatenations and an archive without `config.ign`.
fn ignition_area_seeds() -> Result<Seeds> {
    let xz = trimmed(
        ibi::live_iso::encode_ignition(CONFIG_IGN, 64 << 10)
            .context("encoding an xz Ignition area")?,
    );
    let plain = cpio(&[("config.ign", CONFIG_IGN)])?;
    let other = cpio(&[(
        "etc/NetworkManager/system-connections/a.nmconnection",
        b"[connection]\n",
    )])?;
    let gz = gzip(&plain)?;
    let mut two_gz = gz.clone();
    two_gz.extend_from_slice(&[0; 4]);
    two_gz.extend_from_slice(&gzip(&other)?);
    let mut two_cpio = other.clone();
    two_cpio.extend_from_slice(&plain);
    let mut padded = vec![0u8; 512];
    padded.extend_from_slice(&xz);
    padded.extend_from_slice(&[0; 512]);
    Ok(vec![
        ("xz".into(), xz),
        ("xz-padded".into(), padded),
        ("gzip".into(), gz),
        ("gzip-two-members".into(), two_gz),
        ("cpio".into(), plain),
        ("cpio-two-archives".into(), two_cpio),
        ("cpio-no-config".into(), other),
        ("zstd-magic".into(), vec![0x28, 0xb5, 0x2f, 0xfd, 0, 0]),
    ])
}

fn trimmed(mut v: Vec<u8>) -> Vec<u8> {
    let end = v.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    v.truncate(end);
    v
}

fn cpio(members: &[(&str, &[u8])]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for (name, data) in members {
        let size = u32::try_from(data.len()).with_context(|| format!("cpio member {name}"))?;
        let mut w = cpio::newc::Builder::new(name)
            .mode(0o100_644)
            .write(out, size);
        w.write_all(data)
            .with_context(|| format!("cpio member {name}"))?;
        out = w.finish().with_context(|| format!("cpio member {name}"))?;
    }
    cpio::newc::trailer(out).context("cpio trailer")
}

fn gzip(data: &[u8]) -> Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).context("gzip")?;
    enc.finish().context("gzip")
}

/// The example inputs (extra manifest included) and the templates `ibi create … template` writes.
fn config_seeds(repo: &Path) -> Result<Seeds> {
    let mut seeds = vec![
        (
            "template-image-based-config".to_string(),
            ibi::config::IMAGE_BASED_CONFIG_TEMPLATE.as_bytes().to_vec(),
        ),
        (
            "template-installation".to_string(),
            ibi::config::IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE
                .as_bytes()
                .to_vec(),
        ),
    ];
    for file in [
        "seed-fixtures/example-site/install-config.yaml",
        "seed-fixtures/example-site/image-based-config.yaml",
        "seed-fixtures/example-install/image-based-installation-config.yaml",
        "seed-fixtures/example-site/extra-manifests/50-site-a17-configmap-with-a-name-longer-than-thirty-characters.yaml",
    ] {
        let bytes = std::fs::read(repo.join(file)).with_context(|| format!("reading {file}"))?;
        seeds.push((file.replace('/', "-"), bytes));
    }
    Ok(seeds)
}

/// The fixture seed's layout with its digests turned into placeholders, and its
/// `seed_cluster_info` label and references as the fourth part.
fn seed_manifest_seeds(repo: &Path) -> Result<Seeds> {
    let layout = repo.join("seed-fixtures/seed");
    let read =
        |p: &Path| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
    let index = read(&layout.join("index.json"))?;
    let manifest_digest = json_field(&index, &["manifests", "0", "digest"])?;
    let manifest = read(&blob(&layout, &manifest_digest))?;
    let config_digest = json_field(&manifest, &["config", "digest"])?;
    let config = read(&blob(&layout, &config_digest))?;
    let label = json_field(
        &config,
        &[
            "config",
            "Labels",
            "com.openshift.lifecycle-agent.seed_cluster_info",
        ],
    )?;
    let refs = "quay.io/openshift/seed:4.16.0\noci:/var/tmp/seed:4.16.0\nregistry.example.com:5000/a/b@sha256:aa41253c907312c03f69459414f404277077597dd2d92f4bfba466477d3fe847";
    let parts = [
        index.replace(&manifest_digest, "@MANIFEST@"),
        manifest.replace(&config_digest, "@CONFIG@"),
        config,
        format!("{label}\n{refs}"),
    ];
    let sep = String::from_utf8_lossy(PART_SEPARATOR).into_owned();
    Ok(vec![(
        "fixture-seed".to_string(),
        parts.join(&sep).into_bytes(),
    )])
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    layout
        .join("blobs/sha256")
        .join(digest.trim_start_matches("sha256:"))
}

fn json_field(text: &str, path: &[&str]) -> Result<String> {
    let mut v: serde_json::Value = serde_json::from_str(text).context("parsing fixture JSON")?;
    for key in path {
        v = match key.parse::<usize>() {
            Ok(i) => v.get(i).cloned(),
            Err(_) => v.get(key).cloned(),
        }
        .ok_or_else(|| anyhow!("fixture JSON has no {path:?}"))?;
    }
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow!("fixture JSON {path:?} is not a string"))
}

/// `ibi-configuration` documents in both encodings lca-cli accepts.
fn agent_config_seeds() -> Seeds {
    let json = r#"{"installationDisk":"/dev/vda","seedImage":"quay.io/openshift/seed:4.16.0","seedVersion":"4.16.0","extraPartitionStart":"-40G","extraPartitionLabel":"varlibcontainers","extraPartitionNumber":5,"shutdown":true,"coreosInstallerArgs":["--append-karg","ip=dhcp"],"precacheBestEffort":false}"#;
    let yaml = "installationDisk: /dev/disk/by-path/pci-0000:00:1f.2\nseedImage: oci:/var/tmp/seed:4.16.0\nseedVersion: 4.16.0\nuseContainersFolder: true\nskipDiskCleanup: false\nreleaseRegistry: quay.io\n";
    vec![
        ("json".to_string(), json.as_bytes().to_vec()),
        ("yaml".to_string(), yaml.as_bytes().to_vec()),
    ]
}
