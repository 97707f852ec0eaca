//! The bad-input corpus in `tests/bad-inputs/` (layout in its README): each case is one broken input
//! to one command. ibi must exit 1 without a panic, say `error:` with the fragments the case names
//! (the file and the field), print nothing on stdout, leave every file under the case's temp dir as it
//! was (no output, no temp file, no cache entry), and stay within the case's time and memory limits.
//! One test runs every case and reports every failure at once.
//!
//! `IBI_BAD_INPUTS_CASE=NAME` runs only the cases whose directory name contains NAME.
//! Cases marked `expect_bug` document a known bug and are skipped (with a note) unless
//! `IBI_BAD_INPUTS_KNOWN_BUGS=1`, which runs and asserts them like the others.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

const CASES_DIR: &str = "tests/bad-inputs";
const CASE_FILE: &str = "case.yaml";
const DEFAULT_TIMEOUT_S: u64 = 60;
/// Files up to this size are compared by content; bigger ones (generated, sparse) by size, mtime
/// and inode, which a rewrite or a rename changes.
const HASHED_MAX: u64 = 16 << 20;
/// `agent install` runs with every path it may write inside the case's temp dir, and a
/// `coreos-installer` that fails, so even a config that slipped through could not touch the host.
const AGENT_INSTALL_SANDBOX: [&str; 14] = [
    "--root",
    "{tmp}/agent-root",
    "--sysroot-mount",
    "{tmp}/agent-sysroot",
    "--containers-mount",
    "{tmp}/agent-containers",
    "--state-file",
    "{tmp}/agent-state/state.json",
    "--status-file",
    "{tmp}/agent-state/status.json",
    "--registries-conf",
    "{tmp}/agent-registries.conf",
    "--coreos-installer",
    "/bin/false",
];

/// One `case.yaml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// What is broken, in one line.
    about: String,
    /// The inputs the case starts from, before its own files, edits and generated files.
    #[serde(default)]
    base: Base,
    /// ibi's arguments, with `{dir}`, `{tmp}` and `{repo}` substituted.
    args: Vec<String>,
    #[serde(default)]
    remove: Vec<String>,
    #[serde(default)]
    edit: Vec<Edit>,
    #[serde(default)]
    generate: Vec<Generate>,
    /// Each must occur in stderr.
    expect: Vec<String>,
    /// Run under `ulimit -v` (virtual memory, MiB).
    memory_limit_mib: Option<u64>,
    timeout_s: Option<u64>,
    /// `agent`: the case needs the `agent` feature.
    feature: Option<String>,
    /// A known bug (see the report that found it); the case is skipped until it is fixed.
    expect_bug: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Base {
    /// An empty directory.
    #[default]
    None,
    /// The inputs of `seed-fixtures/example-site` (as the README's quick start).
    Site,
    /// `seed-fixtures/example-install`'s config with the bundled seed by absolute path.
    Install,
}

/// Replaces the single occurrence of `old` in `file` with `new`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Edit {
    file: String,
    old: String,
    new: String,
}

/// Inputs made at test time: too big, too binary or too special to commit. In `case.yaml`:
/// `- {kind: sparse, path: install-config.yaml, mib: 300}`.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Generate {
    /// Extends (or creates) `path` to `mib` MiB with a hole: no disk space, no memory.
    Sparse {
        path: String,
        mib: u64,
    },
    /// Inserts `count` copies of `text` right after the single occurrence of `after` in `path`.
    Repeat {
        path: String,
        after: String,
        text: String,
        count: usize,
    },
    /// Appends `key: [[[…]]]`, `depth` levels deep.
    Nested {
        path: String,
        key: String,
        depth: usize,
    },
    /// `bytes` pseudo-random bytes (the same on every run; not UTF-8).
    Garbage {
        path: String,
        bytes: usize,
    },
    Symlink {
        path: String,
        target: String,
    },
    Fifo {
        path: String,
    },
    Dir {
        path: String,
    },
    /// The first `bytes` bytes of `from` (relative to the repository).
    Truncate {
        from: String,
        path: String,
        bytes: u64,
    },
    /// An ISO 9660 image written by ibi's own writer, holding `files` (path → text) and, with
    /// `gzip_zeros`, a file of gzip-compressed zeros (a decompression bomb).
    Iso {
        path: String,
        volume_id: String,
        #[serde(default)]
        files: BTreeMap<String, String>,
        gzip_zeros: Option<GzipZeros>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GzipZeros {
    path: String,
    mib: usize,
}

/// What the run looked like from outside.
struct Run {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

fn load_case(dir: &Path) -> Case {
    let text = fs::read_to_string(dir.join(CASE_FILE)).expect("case.yaml");
    let case: Case = serde_yaml_ng::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(CASE_FILE).display()));
    assert!(
        !case.expect.is_empty(),
        "{}: expect nothing?",
        dir.display()
    );
    case
}

fn run_case(case_dir: &Path, case: &Case) -> Result<(), String> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let work = tmp.path().join("dir");
    for d in ["dir", "home", "cache", "tmp"] {
        fs::create_dir(tmp.path().join(d)).expect("mkdir");
    }
    let subst = |s: &str| {
        s.replace("{dir}", path_str(&work))
            .replace("{tmp}", path_str(tmp.path()))
            .replace("{repo}", env!("CARGO_MANIFEST_DIR"))
    };
    prepare(case_dir, case, &work, &subst);
    let mut args: Vec<String> = case.args.iter().map(|a| subst(a)).collect();
    if args.starts_with(&["agent".into(), "install".into()]) {
        args.extend(AGENT_INSTALL_SANDBOX.iter().map(|a| subst(a)));
        refuse_existing_disk(&args, &work);
    }
    let before = snapshot(tmp.path());
    let run = run_ibi(&args, case, tmp.path(), &work);
    let after = snapshot(tmp.path());
    let mut problems = check_run(&run, case);
    problems.extend(diff_snapshots(&before, &after));
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "  args: {args:?}\n  {}\n  exit: {:?} after {:.1} s\n  stdout: {}\n  stderr: {}",
        problems.join("\n  "),
        run.status,
        run.elapsed.as_secs_f64(),
        clip(&run.stdout),
        clip(&run.stderr)
    ))
}

fn check_run(run: &Run, case: &Case) -> Vec<String> {
    let mut problems = Vec::new();
    match run.status {
        None => problems.push(format!(
            "did not finish within {} s (hung?)",
            case.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S)
        )),
        Some(s) if s.code().is_none() && case.memory_limit_mib.is_some() => problems.push(format!(
            "{s}, want exit 1: out of memory under the case's {} MiB limit?",
            case.memory_limit_mib.unwrap_or_default()
        )),
        Some(s) if s.code() != Some(1) => problems.push(format!("{s}, want exit status 1")),
        Some(_) => {}
    }
    if run.stderr.contains("panicked at") {
        problems.push("panicked".into());
    }
    if !run.stderr.lines().any(|l| l.starts_with("error: ")) {
        problems.push("no `error: ` line on stderr".into());
    }
    for frag in &case.expect {
        if !run.stderr.contains(frag.as_str()) {
            problems.push(format!("stderr lacks {frag:?}"));
        }
    }
    if !run.stdout.is_empty() {
        problems.push("stdout is not empty (it holds results only)".into());
    }
    problems
}

/// Copies the base, removes what the case removes, copies the case's own files over it, then
/// applies the edits and the generators.
fn prepare(case_dir: &Path, case: &Case, work: &Path, subst: &dyn Fn(&str) -> String) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    match case.base {
        Base::None => {}
        Base::Site => {
            let site = common::copy_example();
            common::copy_tree(site.path(), work);
        }
        Base::Install => {
            let config = "image-based-installation-config.yaml";
            let text = fs::read_to_string(repo.join("seed-fixtures/example-install").join(config))
                .expect("example-install config")
                .replace(
                    "oci:seed-fixtures/seed:",
                    &format!("oci:{}:", repo.join("seed-fixtures/seed").display()),
                );
            fs::write(work.join(config), text).expect("write config");
        }
    }
    for r in &case.remove {
        let p = work.join(r);
        if p.is_dir() {
            fs::remove_dir_all(&p).expect("remove dir");
        } else {
            fs::remove_file(&p).unwrap_or_else(|e| panic!("removing {r}: {e}"));
        }
    }
    for e in fs::read_dir(case_dir).expect("case dir") {
        let e = e.expect("entry");
        if e.file_name() == CASE_FILE {
            continue;
        }
        let to = work.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            common::copy_tree(&e.path(), &to);
        } else {
            fs::copy(e.path(), &to).expect("copy case file");
        }
    }
    for e in &case.edit {
        let p = work.join(&e.file);
        let text = fs::read_to_string(&p).unwrap_or_else(|err| panic!("{}: {err}", e.file));
        assert_eq!(
            text.matches(&e.old).count(),
            1,
            "edit of {}: {:?} must occur exactly once",
            e.file,
            e.old
        );
        fs::write(&p, text.replacen(&e.old, &e.new, 1)).expect("write edit");
    }
    for g in &case.generate {
        generate(g, work, subst);
    }
}

fn generate(g: &Generate, work: &Path, subst: &dyn Fn(&str) -> String) {
    match g {
        Generate::Sparse { path, mib } => {
            let f = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(work.join(path))
                .expect("open sparse");
            f.set_len(mib << 20).expect("set_len");
        }
        Generate::Repeat {
            path,
            after,
            text,
            count,
        } => {
            let p = work.join(path);
            let old = fs::read_to_string(&p).expect("read for repeat");
            assert_eq!(
                old.matches(after.as_str()).count(),
                1,
                "{after:?} in {path}"
            );
            let at = old.find(after.as_str()).unwrap() + after.len();
            let mut new = String::with_capacity(old.len() + text.len() * count);
            new.push_str(&old[..at]);
            for _ in 0..*count {
                new.push_str(text);
            }
            new.push_str(&old[at..]);
            fs::write(&p, new).expect("write repeat");
        }
        Generate::Nested { path, key, depth } => {
            let p = work.join(path);
            let mut text = fs::read_to_string(&p).unwrap_or_default();
            text.push_str(&format!(
                "{key}: {}{}\n",
                "[".repeat(*depth),
                "]".repeat(*depth)
            ));
            fs::write(&p, text).expect("write nested");
        }
        Generate::Garbage { path, bytes } => fs::write(work.join(path), garbage(*bytes)).unwrap(),
        Generate::Symlink { path, target } => {
            std::os::unix::fs::symlink(subst(target), work.join(path)).expect("symlink")
        }
        Generate::Fifo { path } => {
            let out = Command::new("mkfifo")
                .arg(work.join(path))
                .output()
                .expect("mkfifo");
            assert!(out.status.success(), "mkfifo failed");
        }
        Generate::Dir { path } => fs::create_dir_all(work.join(path)).expect("mkdir"),
        Generate::Truncate { from, path, bytes } => {
            let mut data = fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(from)).expect(from);
            assert!(*bytes < data.len() as u64, "{from} is shorter than {bytes}");
            data.truncate(*bytes as usize);
            fs::write(work.join(path), data).expect("write truncated");
        }
        Generate::Iso {
            path,
            volume_id,
            files,
            gzip_zeros,
        } => {
            let mut b = ibi::iso9660::IsoBuilder::new();
            for (name, text) in files {
                b.add_file(name, text.as_bytes().to_vec(), 0o644)
                    .expect("add_file");
            }
            if let Some(z) = gzip_zeros {
                b.add_file(&z.path, gzip_of_zeros(z.mib << 20), 0o644)
                    .expect("add_file");
            }
            let opts = ibi::iso9660::WriteOptions {
                volume_id: volume_id.clone(),
                timestamp: 0,
            };
            b.write(
                &opts,
                fs::File::create(work.join(path)).expect("create iso"),
            )
            .expect("write iso");
        }
    }
}

fn gzip_of_zeros(n: usize) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..n.div_ceil(chunk.len()) {
        gz.write_all(&chunk).expect("gzip");
    }
    gz.finish().expect("gzip")
}

/// xorshift64: the same bytes every run, about every byte value, so never valid UTF-8 for long.
fn garbage(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The corpus must never name a real disk: refuse to run an `agent install` whose config's
/// `installationDisk` (matched case-insensitively, as ibi does) exists.
fn refuse_existing_disk(args: &[String], work: &Path) {
    let Some(i) = args.iter().position(|a| a == "-f" || a == "--config") else {
        panic!("agent install case without -f: it would read /var/tmp/ibi-configuration.json");
    };
    let config = work.join(&args[i + 1]);
    // A FIFO or a directory cannot name a disk (and reading a FIFO would block).
    if !fs::metadata(&config).is_ok_and(|m| m.is_file()) {
        return;
    }
    let Ok(text) = fs::read_to_string(&config) else {
        return;
    };
    let Ok(serde_yaml_ng::Value::Mapping(map)) = serde_yaml_ng::from_str(&text) else {
        return;
    };
    for (k, v) in &map {
        if let (Some(k), Some(disk)) = (k.as_str(), v.as_str())
            && k.eq_ignore_ascii_case("installationDisk")
        {
            assert!(
                !Path::new(disk).exists() && !work.join(disk).exists(),
                "{}: installationDisk {disk} exists; the corpus must name a disk that does not",
                config.display()
            );
        }
    }
}

fn run_ibi(args: &[String], case: &Case, tmp: &Path, work: &Path) -> Run {
    let bin = env!("CARGO_BIN_EXE_ibi");
    let mut cmd = match case.memory_limit_mib {
        Some(mib) => {
            let mut c = Command::new("sh");
            c.args([
                "-c",
                r#"ulimit -v "$1" || exit 99; shift; exec "$@""#,
                "ibi-limit",
            ])
            .arg((mib * 1024).to_string())
            .arg(bin);
            c
        }
        None => Command::new(bin),
    };
    let out = tempfile::tempdir().expect("tempdir");
    let (o, e) = (out.path().join("stdout"), out.path().join("stderr"));
    cmd.args(args)
        .current_dir(work)
        .env_remove("RUST_LOG")
        .env_remove("OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE")
        .env("HOME", tmp.join("home"))
        .env("XDG_CACHE_HOME", tmp.join("cache"))
        .env("TMPDIR", tmp.join("tmp"))
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&o).expect("stdout file"))
        .stderr(fs::File::create(&e).expect("stderr file"));
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawning ibi");
    let limit = Duration::from_secs(case.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S));
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &Path| {
        let mut s = Vec::new();
        fs::File::open(p)
            .and_then(|mut f| f.read_to_end(&mut s))
            .expect("read output");
        String::from_utf8_lossy(&s).into_owned()
    };
    Run {
        status,
        stdout: read(&o),
        stderr: read(&e),
        elapsed: start.elapsed(),
    }
}

/// Path → what it is: type and mode, plus the content hash (small files) or size, mtime and inode.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
    for e in fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("entry").path();
        let m = fs::symlink_metadata(&p).expect("lstat");
        let rel = p.strip_prefix(root).unwrap().to_path_buf();
        let ft = m.file_type();
        let what = if ft.is_dir() {
            walk(root, &p, out);
            format!("dir {:o}", m.mode() & 0o7777)
        } else if ft.is_symlink() {
            format!("symlink -> {}", fs::read_link(&p).unwrap().display())
        } else if ft.is_file() && m.len() <= HASHED_MAX {
            let digest = openssl::sha::sha256(&fs::read(&p).expect("read"));
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            format!(
                "file {:o} {} bytes sha256 {hex}",
                m.mode() & 0o7777,
                m.len()
            )
        } else {
            format!(
                "{:?} {:o} {} bytes mtime {}.{} ino {}",
                ft,
                m.mode() & 0o7777,
                m.len(),
                m.mtime(),
                m.mtime_nsec(),
                m.ino()
            )
        };
        out.insert(rel, what);
    }
}

fn diff_snapshots(
    before: &BTreeMap<PathBuf, String>,
    after: &BTreeMap<PathBuf, String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (p, was) in before {
        match after.get(p) {
            None => problems.push(format!("{} was removed", p.display())),
            Some(now) if now != was => {
                problems.push(format!("{} changed: {was} -> {now}", p.display()))
            }
            Some(_) => {}
        }
    }
    for (p, now) in after {
        if !before.contains_key(p) {
            problems.push(format!("{} was created ({now})", p.display()));
        }
    }
    problems
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

/// The start and the end of a long output.
fn clip(s: &str) -> String {
    const MAX: usize = 3000;
    if s.len() <= MAX {
        return s.to_string();
    }
    let head = s.char_indices().nth(MAX / 2).map_or(s.len(), |(i, _)| i);
    let tail = s.char_indices().rev().nth(MAX / 2).map_or(0, |(i, _)| i);
    format!("{}\n[… {} bytes …]\n{}", &s[..head], s.len(), &s[tail..])
}

#[test]
fn every_bad_input_is_refused_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(CASES_DIR);
    let only = std::env::var("IBI_BAD_INPUTS_CASE").ok();
    let known_bugs = std::env::var_os("IBI_BAD_INPUTS_KNOWN_BUGS").is_some_and(|v| v == "1");
    let mut names: Vec<String> = fs::read_dir(&root)
        .expect("tests/bad-inputs")
        .map(|e| e.expect("entry"))
        .filter(|e| e.path().join(CASE_FILE).is_file())
        .map(|e| e.file_name().into_string().expect("UTF-8 case name"))
        .collect();
    names.sort();
    assert!(names.len() >= 40, "the corpus shrank: {}", names.len());
    let (mut ran, mut failures) = (0, Vec::new());
    for name in &names {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let case = load_case(&root.join(name));
        if case.feature.as_deref() == Some("agent") && !cfg!(feature = "agent") {
            crate::common::missing(name, "the case needs --features agent");
        }
        if let Some(bug) = &case.expect_bug
            && !known_bugs
        {
            eprintln!("KNOWN BUG, skipped {name}: {bug}");
            continue;
        }
        ran += 1;
        if let Err(why) = run_case(&root.join(name), &case) {
            failures.push(format!("{name} ({}):\n{why}", case.about));
        }
    }
    eprintln!("{ran} bad-input case(s) run");
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
