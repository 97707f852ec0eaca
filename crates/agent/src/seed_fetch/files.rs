//! Routing the seed's root files to their consumers while the layer streams: small documents collected
//! into memory under a size cap, the big archives (`ostree.tgz`, `var.tgz`, `etc.tgz`) streamed straight
//! into whatever restores them. At the end, the files that were required but absent are reported
//! together, and the ones nobody asked for are listed for a warning.

#[cfg(any(test, feature = "test-support"))]
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::io::Read;

use anyhow::{Result, bail};

/// `SeedClusterInfo` JSON (lifecycle-agent reference §1.4); also inside var.tgz.
pub const MANIFEST_JSON: &str = "manifest.json";
/// Image references to precache, newline-separated, no trailing newline (§1.5).
pub const CONTAINERS_LIST: &str = "containers.list";
/// `rpm-ostree status -v --json` of the seed: finds the booted deployment.
pub const RPM_OSTREE_JSON: &str = "rpm-ostree.json";
/// The seed's MachineConfig: `spec.kernelArguments` and `spec.fips` become the new deployment's kargs.
pub const MCO_CURRENTCONFIG_JSON: &str = "mco-currentconfig.json";
/// `/etc/<path>` lines to delete from the new deployment's `/etc`.
pub const ETC_DELETIONS: &str = "etc.deletions";
/// The seed deployment's origin file, `ostree-<checksum>.<serial>.origin`.
pub const ORIGIN_PATTERN: &str = "ostree-*.origin";
/// The lifecycle-agent binary; a real one is tens of MiB, so stream or ignore it rather than collect it.
pub const LCA_CLI: &str = "lca-cli";
/// A copy of the seed's `/ostree/repo` (members start with `./`).
pub const OSTREE_TGZ: &str = "ostree.tgz";
/// The seed's `/var` (members start with `var/`).
pub const VAR_TGZ: &str = "var.tgz";
/// The seed's modified and added `/etc` files (members start with `etc/`).
pub const ETC_TGZ: &str = "etc.tgz";
/// The seed-creation recert config: present in most seeds, unused by image-based installation.
pub(crate) const RECERT_CONFIG_JSON: &str = "recert_config.json";
/// Cap for the small documents: the largest, `rpm-ostree.json`, is a few KiB.
pub const SMALL_FILE_MAX: u64 = 16 << 20;

/// Whether a route's file must be in the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Required,
    Optional,
}

/// A consumer of one streamed file: its root-relative path, its bytes (`Send`, so the consumer may
/// read them on a thread of its own), its size.
pub(crate) type StreamConsumer<'h> =
    Box<dyn FnMut(&str, &mut (dyn Read + Send), u64) -> Result<()> + 'h>;

enum Action<'h> {
    #[cfg(any(test, feature = "test-support"))]
    Collect {
        max: u64,
    },
    Stream(StreamConsumer<'h>),
    Ignore,
}

struct Route<'h> {
    pattern: String,
    presence: Presence,
    action: Action<'h>,
    matched: bool,
}

/// Routes seed root files to handlers by name (exact, or a pattern with one `*`); the first matching
/// route wins. Use [`SeedFiles::handle`] as the handler of [`super::walk_seed`], then [`SeedFiles::finish`].
#[derive(Default)]
pub struct SeedFiles<'h> {
    routes: Vec<Route<'h>>,
    #[cfg(any(test, feature = "test-support"))]
    collected: BTreeMap<String, Vec<u8>>,
    unexpected: Vec<(String, u64)>,
}

/// What the routing gave.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SeedFilesOutcome {
    /// Collected files by root-relative path (test support: ibi itself streams every file).
    #[cfg(any(test, feature = "test-support"))]
    pub(crate) collected: BTreeMap<String, Vec<u8>>,
    /// Files no route matched, with their sizes (warn about them: the seed format may have moved on).
    pub unexpected: Vec<(String, u64)>,
}

#[cfg(any(test, feature = "test-support"))]
impl SeedFilesOutcome {
    /// The collected file `name`, which the caller routed as required.
    pub fn file(&self, name: &str) -> Result<&[u8]> {
        match self.collected.get(name) {
            Some(bytes) => Ok(bytes),
            None => bail!("the seed has no {name}"),
        }
    }

    /// The collected files matching `pattern`, in name order.
    pub fn matching<'a>(&'a self, pattern: &'a str) -> impl Iterator<Item = (&'a str, &'a [u8])> {
        self.collected
            .iter()
            .filter(move |(name, _)| pattern_matches(pattern, name))
            .map(|(name, bytes)| (name.as_str(), bytes.as_slice()))
    }
}

impl<'h> SeedFiles<'h> {
    pub fn new() -> SeedFiles<'h> {
        SeedFiles::default()
    }

    /// Collects files matching `pattern` into memory, refusing any over `max` bytes (test support:
    /// ibi itself streams every file, small ones through [`collect_small`]).
    #[cfg(any(test, feature = "test-support"))]
    pub fn collect(&mut self, pattern: &str, presence: Presence, max: u64) -> &mut Self {
        self.route(pattern, presence, Action::Collect { max })
    }

    /// Streams files matching `pattern` to `consumer` (e.g. into `restore_files::restore_var`).
    pub fn stream(
        &mut self,
        pattern: &str,
        presence: Presence,
        consumer: impl FnMut(&str, &mut (dyn Read + Send), u64) -> Result<()> + 'h,
    ) -> &mut Self {
        self.route(pattern, presence, Action::Stream(Box::new(consumer)))
    }

    /// Skips files matching `pattern` without reporting them as unexpected.
    pub fn ignore(&mut self, pattern: &str) -> &mut Self {
        self.route(pattern, Presence::Optional, Action::Ignore)
    }

    fn route(&mut self, pattern: &str, presence: Presence, action: Action<'h>) -> &mut Self {
        self.routes.push(Route {
            pattern: pattern.to_string(),
            presence,
            action,
            matched: false,
        });
        self
    }

    /// Hands one file to its route; a file no route matches is recorded as unexpected.
    pub(crate) fn handle(
        &mut self,
        path: &str,
        reader: &mut (dyn Read + Send),
        size: u64,
    ) -> Result<()> {
        let Some(route) = self
            .routes
            .iter_mut()
            .find(|r| pattern_matches(&r.pattern, path))
        else {
            self.unexpected.push((path.to_string(), size));
            return Ok(());
        };
        route.matched = true;
        match &mut route.action {
            #[cfg(any(test, feature = "test-support"))]
            Action::Collect { max } => {
                let bytes = collect_small(path, reader, size, *max)?;
                // A later layer's copy replaces an earlier one, as in the image's filesystem.
                self.collected.insert(path.to_string(), bytes);
            }
            Action::Stream(consumer) => consumer(path, reader, size)?,
            Action::Ignore => {}
        }
        Ok(())
    }

    /// Checks that every required route saw a file; names all the missing ones at once.
    pub(crate) fn finish(self) -> Result<SeedFilesOutcome> {
        let missing: BTreeSet<&str> = self
            .routes
            .iter()
            .filter(|r| r.presence == Presence::Required && !r.matched)
            .map(|r| r.pattern.as_str())
            .collect();
        if !missing.is_empty() {
            let list: Vec<&str> = missing.into_iter().collect();
            bail!(
                "the seed image lacks {} (a lifecycle-agent seed has them at its root)",
                list.join(", ")
            );
        }
        Ok(SeedFilesOutcome {
            #[cfg(any(test, feature = "test-support"))]
            collected: self.collected,
            unexpected: self.unexpected,
        })
    }
}

/// Reads a small file whole: refuses one whose declared size, or actual length, is over `max` bytes.
pub(crate) fn collect_small(
    name: &str,
    reader: &mut dyn Read,
    size: u64,
    max: u64,
) -> Result<Vec<u8>> {
    if size > max {
        bail!("seed file {name} is {size} bytes, over the {max}-byte limit for a small file");
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    reader.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        bail!("seed file {name} is over the {max}-byte limit for a small file");
    }
    Ok(bytes)
}

/// `pattern` equals `name`, or has one `*` standing for any run of characters other than `/`.
fn pattern_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, suffix)) => {
            name.len() >= prefix.len() + suffix.len()
                && name.starts_with(prefix)
                && name.ends_with(suffix)
                && !name[prefix.len()..name.len() - suffix.len()].contains('/')
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    #[test]
    fn matches_patterns() {
        let cases = [
            ("manifest.json", "manifest.json", true),
            ("manifest.json", "var/seed_data/manifest.json", false),
            ("ostree-*.origin", "ostree-3f2a.0.origin", true),
            ("ostree-*.origin", "ostree-.origin", true),
            ("ostree-*.origin", "ostree.origin", false),
            ("ostree-*.origin", "ostree-a/b.origin", false),
            ("*.tgz", "var.tgz", true),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(pattern_matches(pattern, name), want, "{pattern} {name}");
        }
    }

    #[test]
    fn caps_small_files() {
        let e = collect_small("rpm-ostree.json", &mut &b"0123456789"[..], 10, 4).expect_err("cap");
        assert_eq!(
            e.to_string(),
            "seed file rpm-ostree.json is 10 bytes, over the 4-byte limit for a small file"
        );
        // A size that lies is caught by the read itself.
        let e = collect_small("x", &mut &b"0123456789"[..], 2, 4).expect_err("lie");
        assert_eq!(
            e.to_string(),
            "seed file x is over the 4-byte limit for a small file"
        );
        let ok = collect_small("x", &mut &b"0123"[..], 4, 4).expect("at the cap");
        assert_eq!(ok, b"0123");
    }

    #[test]
    fn routes_files() {
        let streamed = RefCell::new(Vec::new());
        let mut files = SeedFiles::new();
        files
            .collect(MANIFEST_JSON, Presence::Required, SMALL_FILE_MAX)
            .collect(ORIGIN_PATTERN, Presence::Required, SMALL_FILE_MAX)
            .ignore(RECERT_CONFIG_JSON)
            .stream("*.tgz", Presence::Required, |path, r, size| {
                let mut body = String::new();
                r.read_to_string(&mut body)?;
                streamed.borrow_mut().push(format!("{path}:{size}:{body}"));
                Ok(())
            });
        let input: [(&str, &[u8]); 5] = [
            ("manifest.json", b"{}"),
            ("ostree-ab.0.origin", b"[origin]"),
            ("var.tgz", b"vv"),
            ("recert_config.json", b"{}"),
            ("surprise", b"!"),
        ];
        for (name, body) in input {
            files
                .handle(name, &mut &body[..], body.len() as u64)
                .expect(name);
        }
        let out = files.finish().expect("finish");
        assert_eq!(out.file(MANIFEST_JSON).expect("manifest"), b"{}");
        let origins: Vec<&str> = out.matching(ORIGIN_PATTERN).map(|(n, _)| n).collect();
        assert_eq!(origins, ["ostree-ab.0.origin"]);
        assert_eq!(out.unexpected, [("surprise".to_string(), 1)]);
        assert_eq!(*streamed.borrow(), ["var.tgz:2:vv"]);
        let e = out.file(CONTAINERS_LIST).expect_err("absent");
        assert_eq!(e.to_string(), "the seed has no containers.list");
    }

    #[test]
    fn reports_every_missing_file_and_stream_errors() {
        let mut files = SeedFiles::new();
        files
            .collect(MANIFEST_JSON, Presence::Required, 4)
            .collect(CONTAINERS_LIST, Presence::Required, 4)
            .collect(ETC_DELETIONS, Presence::Optional, 4)
            .stream(VAR_TGZ, Presence::Required, |_, _, _| {
                bail!("no space left")
            });
        let e = files.handle(VAR_TGZ, &mut &b""[..], 0).expect_err("stream");
        assert_eq!(e.to_string(), "no space left");
        let e = files
            .handle(MANIFEST_JSON, &mut &b"{...}"[..], 5)
            .expect_err("cap");
        assert!(e.to_string().contains("over the 4-byte limit"), "{e}");
        let e = files.finish().expect_err("missing");
        // var.tgz and manifest.json were seen (and failed), so only containers.list is missing.
        assert_eq!(
            e.to_string(),
            "the seed image lacks containers.list (a lifecycle-agent seed has them at its root)"
        );
    }
}
