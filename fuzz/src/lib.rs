//! The bodies of the fuzz targets, one function per target, kept apart from the libFuzzer glue so
//! the same code runs in two places: under `cargo fuzz run <target>` and, over every input the
//! fuzzer ever found, in the root crate's `tests/fast/fuzz_regressions.rs` (which includes this file by
//! path). Each function feeds untrusted bytes to ibi's parsers through their public API and
//! returns the first error as text; a panic, a hang or a huge allocation is the only failure.
//! Only `ibi` and std are used here, so the file compiles inside either crate.

use std::io::Cursor;

use ibi::iso9660::IsoReader;
use ibi::live_iso;

/// Separates the parts of a structured input (files of a built ISO, blobs of an OCI layout).
/// Long and unlikely in real data, so seeds stay readable and the fuzzer learns it from the
/// comparison hints.
pub const PART_SEPARATOR: &[u8] = b"\n#@part@#\n";

/// File bytes one ISO input may read back, as a multiple of its length: every entry may point at
/// the same large extent, and reading it a thousand times proves nothing more than reading it once.
const READ_BUDGET_FACTOR: u64 = 8;

/// Splits `data` into exactly `n` parts at [`PART_SEPARATOR`]; missing parts are empty, extra
/// separators stay in the last part.
pub fn split_parts(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut parts = Vec::with_capacity(n);
    let mut rest = data;
    while parts.len() + 1 < n {
        match find(rest, PART_SEPARATOR) {
            Some(at) => {
                parts.push(&rest[..at]);
                rest = &rest[at + PART_SEPARATOR.len()..];
            }
            None => break,
        }
    }
    parts.push(rest);
    parts.resize(n, &[]);
    parts
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Opens `data` as an ISO image, walks it, looks every entry up by both names and reads every file.
pub fn iso9660_reader(data: &[u8]) -> Result<(), String> {
    let mut iso = IsoReader::open(Cursor::new(data)).map_err(|e| e.to_string())?;
    let _ = (iso.volume_id().len(), iso.has_rock_ridge());
    let entries = iso.walk().map_err(|e| e.to_string())?;
    let mut budget = (data.len() as u64).saturating_mul(READ_BUDGET_FACTOR);
    let mut first_err = None;
    for entry in &entries {
        let found = iso.find(&entry.path).map(|e| e.extent);
        let found_iso = iso.find_iso(&entry.iso_path).map(|e| e.extent);
        if let Err(e) = found.and(found_iso) {
            first_err.get_or_insert(e.to_string());
        }
        if entry.is_dir {
            continue;
        }
        // Sizes past the image are read too: they must fail before allocating anything.
        if entry.size <= data.len() as u64 {
            let Some(left) = budget.checked_sub(entry.size) else {
                continue;
            };
            budget = left;
        }
        match iso.read_entry(entry) {
            Ok(bytes) if bytes.len() as u64 != entry.size => {
                panic!("read {} bytes of a {}-byte file", bytes.len(), entry.size)
            }
            Ok(_) => {}
            Err(e) => {
                first_err.get_or_insert(e.to_string());
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// The live-ISO embed areas of an image. The first byte picks the input's shape: even, the rest
/// is a whole ISO; odd, the rest is [`PART_SEPARATOR`]-separated contents of the files a CoreOS
/// image carries (see [`LIVE_ISO_FILES`]), built into an ISO here, so the fuzzer works on the
/// descriptors and slots rather than on ISO 9660 structures.
pub fn live_iso_embed(data: &[u8]) -> Result<(), String> {
    let Some((&mode, rest)) = data.split_first() else {
        return Err("empty input".to_string());
    };
    if mode % 2 == 0 {
        return embed_areas(rest);
    }
    let image = build_live_iso(rest)?;
    embed_areas(&image)
}

/// The files of the structured `live_iso_embed` input, in order; an empty part leaves the file out.
pub const LIVE_ISO_FILES: [&str; 6] = [
    "coreos/igninfo.json",
    "coreos/kargs.json",
    "EFI/fedora/grub.cfg",
    "isolinux/isolinux.cfg",
    "images/ignition.img",
    "images/cdboot.img",
];

/// Builds an ISO holding the non-empty parts of `data` as [`LIVE_ISO_FILES`].
pub fn build_live_iso(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut b = ibi::iso9660::IsoBuilder::new();
    for (path, part) in LIVE_ISO_FILES
        .iter()
        .zip(split_parts(data, LIVE_ISO_FILES.len()))
    {
        if !part.is_empty() {
            b.add_file(path, part.to_vec(), 0o644)
                .map_err(|e| e.to_string())?;
        }
    }
    let opts = ibi::iso9660::WriteOptions {
        volume_id: "fuzz".to_string(),
        timestamp: 0,
    };
    let mut out = Vec::new();
    b.write(&opts, &mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// Locates and reads the Ignition area and the karg slots, then encodes new kargs.
fn embed_areas(image: &[u8]) -> Result<(), String> {
    let mut iso = IsoReader::open(Cursor::new(image)).map_err(|e| e.to_string())?;
    let ignition = live_iso::find_ignition_area(&mut iso).map_err(|e| e.to_string());
    let kargs = live_iso::find_kargs(&mut iso).map_err(|e| e.to_string());
    let mut file = iso.into_inner();
    if let Ok(area) = &ignition {
        live_iso::is_customized(&mut file, area).map_err(|e| e.to_string())?;
    }
    if let Ok(Some(areas)) = &kargs {
        let current = live_iso::read_kargs(&mut file, areas).map_err(|e| e.to_string())?;
        for patch in live_iso::encode_kargs(areas, &current).map_err(|e| e.to_string())? {
            assert_eq!(patch.data.len(), areas.size, "a karg patch fills its slot");
        }
    }
    ignition.and(kargs).map(drop)
}

/// `/coreos/kargs.json` and `/coreos/igninfo.json` descriptors on their own.
pub fn kargs_json(data: &[u8]) -> Result<(), String> {
    let info = live_iso::parse_igninfo(data).map(drop);
    let kargs = live_iso::parse_kargs_json(data).map(|desc| {
        let areas = live_iso::KargsAreas {
            slots: desc
                .files
                .iter()
                .map(|f| live_iso::KargSlot {
                    offset: f.offset,
                    end: b'\n',
                    pad: b'#',
                })
                .collect(),
            size: desc.size,
            default: desc.default,
        };
        let _ = live_iso::encode_kargs(&areas, &areas.default);
    });
    info.or(kargs).map_err(|e| e.to_string())
}

/// The Ignition embed area decoder: xz, gzip or plain newc cpio archives.
pub fn cpio_reader(data: &[u8]) -> Result<(), String> {
    let _ = live_iso::is_pristine(data);
    live_iso::decode_ignition(data)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The three site/installation inputs: strict decoding, then validation of what decodes; and the
/// same bytes as an extra manifest (any bytes: that loader checks UTF-8 itself).
pub fn config_decoders(data: &[u8]) -> Result<(), String> {
    use ibi::config;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("manifest.yaml"), data).map_err(|e| e.to_string())?;
    let _ = config::load_extra_manifests(dir.path());
    let text = std::str::from_utf8(data).map_err(|e| e.to_string())?;
    let mut decoded = false;
    if let Ok(c) = config::parse_install_config(text) {
        let _ = config::validate_install_config(&c);
        let _ = (
            c.machine_network_cidrs(),
            c.network_type(),
            c.platform_names(),
        );
        decoded = true;
    }
    if let Ok(c) = config::parse_image_based_config(text) {
        let _ = config::validate_image_based_config(&c);
        let _ = c.canonical_network_config();
        decoded = true;
    }
    match config::parse_installation_config(text) {
        Ok(c) => {
            let _ = config::validate_installation_config(&c);
            let _ = c.canonical_network_config();
            let _ = ibi::seed::SeedExpectations::from_installation(&c);
            Ok(())
        }
        Err(_) if decoded => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Seed image metadata: the `seed_cluster_info` label, seed references, and an OCI image layout
/// built from three parts (index.json, manifest, config). The literal `@MANIFEST@` in the index
/// and `@CONFIG@` in the manifest are replaced by the sha256 digests of the other parts, so the
/// fuzzer reaches the decoders behind the digest checks.
pub fn seed_manifest(data: &[u8]) -> Result<(), String> {
    let parts = split_parts(data, 4);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let _ = ibi::seed::parse_seed_cluster_info(&text(parts[3]));
    for line in text(parts[3]).lines().take(16) {
        let _ = ibi::seed::parse_seed_reference(line).map(|r| r.to_string());
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    write_layout(dir.path(), &parts[..3])?;
    let image = ibi::seed::registry::inspect_layout_image(dir.path(), None, "amd64")
        .map_err(|e| format!("{e:#}"))?;
    let info = ibi::seed::SeedInfo {
        digest: image.digest,
        pinned_reference: None,
        architecture: image.architecture,
        cluster_info: None,
        labels: image.labels,
        created: image.created,
        source: image.source,
    };
    let want = ibi::seed::SeedExpectations {
        seed_version: "4.16.0".to_string(),
        architecture: "amd64".to_string(),
        extra_partition_label: Some("var-lib-containers".to_string()),
    };
    let _ = ibi::seed::check_seed(&info, &want);
    Ok(())
}

/// Writes `oci-layout`, `index.json` and the two blobs, digests substituted.
fn write_layout(dir: &std::path::Path, parts: &[&[u8]]) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).map_err(io)?;
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).map_err(io)?;
    let config = parts[2].to_vec();
    let config_hex = sha256_hex(&config);
    let manifest = replace(parts[1], b"@CONFIG@", &format!("sha256:{config_hex}"));
    let manifest_hex = sha256_hex(&manifest);
    let index = replace(parts[0], b"@MANIFEST@", &format!("sha256:{manifest_hex}"));
    std::fs::write(blobs.join(config_hex), config).map_err(io)?;
    std::fs::write(blobs.join(manifest_hex), manifest).map_err(io)?;
    std::fs::write(dir.join("index.json"), index).map_err(io)
}

fn replace(data: &[u8], from: &[u8], to: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut rest = data;
    while let Some(at) = find(rest, from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to.as_bytes());
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    openssl::sha::sha256(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The agent's `ibi-configuration` (YAML or JSON), decoded, defaulted and validated.
#[cfg(feature = "agent")]
pub fn agent_config(data: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(data).map_err(|e| e.to_string())?;
    ibi::agent::prepare_config::parse_prepare_config(text)
        .map(drop)
        .map_err(|e| format!("{e:#}"))
}
