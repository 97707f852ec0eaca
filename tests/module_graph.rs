//! The module graph of `src/` has no cycle and its arrows point down (issue 12): read from the code's
//! own paths (`use crate::…`, `use super::…`, and `crate::…` written inline), every file is a module,
//! and a path is resolved to the deepest module it names — through a facade's `pub use` to the child that
//! defines the item, so importing through a facade is not an arrow to the facade. The crates of their
//! own under `crates/` are read the same way, each as the room ibi re-exports it as (its library's
//! name: `crates/contract/src/seed_image.rs` is `contract::seed_image`), so their files keep the same
//! rules and an arrow from `src/` into one is placed on its floor.
//!
//! Checked: no cycle between modules (files); no cycle between rooms (the top-level modules); and every
//! arrow between rooms goes to a room on a lower floor of [`FLOORS`] (or the same floor only where listed
//! in [`SIDEWAYS`]). A failure lists the offending arrows with the file and the path that makes them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Rooms by floor, top first. A room may import rooms on lower floors only.
const FLOORS: &[&[&str]] = &[
    &["main"],
    &["commands"],
    &["cli"],
    &["deliver"],
    &["agent", "config_image", "install_image", "hub"],
    &["seed"],
    &["config"],
    &["contract"],
    // agent, contract, these two floors and util are crates of their own (crates/), re-exported
    // under these names: the compiler holds the arrows between crates (a crate depends only on those
    // below it), this test the arrows into them from src/ and the modules inside each.
    &["live_iso", "redfish", "kubeapi"],
    &["iso9660", "ignition", "image_ref"],
    &["util"],
];

/// Same-floor arrows allowed (from, to).
const SIDEWAYS: &[(&str, &str)] = &[];

type Module = Vec<String>;

/// One file's module and its text with inline `#[cfg(test)]` modules cut off.
struct Source {
    /// The module `crate::` stands for in this file: ibi's root (empty) under src/, the room a crate
    /// of its own is re-exported as (`["contract"]`) under crates/.
    root: Module,
    module: Module,
    /// The file as a failure names it: under src/ relative to src/, a crate's from the workspace.
    shown: String,
    text: String,
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn src() -> PathBuf {
    workspace().join("src")
}

/// The crates of their own: each one's room (its library's name, which ibi re-exports it under) and
/// its source folder.
fn crates() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for e in fs::read_dir(workspace().join("crates")).unwrap() {
        let dir = e.unwrap().path();
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = manifest
            .split("[lib]")
            .nth(1)
            .and_then(|lib| {
                lib.lines()
                    .find_map(|l| l.trim().strip_prefix("name = \"")?.strip_suffix('"'))
            })
            .unwrap_or_else(|| panic!("{}: no [lib] name", dir.display()));
        out.push((name.to_string(), dir.join("src")));
    }
    out.sort();
    out
}

/// Every `.rs` file under src and under each crate's src (but test-only files), as its module path
/// (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; `lib.rs` and `main.rs` are the crate root and
/// `main`; `crates/contract/src/a.rs` is `contract::a`).
fn sources() -> Vec<Source> {
    let mut out = sources_under(&src(), Vec::new());
    for (room, dir) in crates() {
        out.extend(sources_under(&dir, vec![room]));
    }
    out
}

fn sources_under(dir: &Path, root: Module) -> Vec<Source> {
    let mut files = Vec::new();
    collect(dir, &mut files);
    let test_only = test_only_files(&files);
    files
        .into_iter()
        .filter(|f| !test_only.contains(f))
        .map(|file| {
            let rel = file.strip_prefix(dir).unwrap().with_extension("");
            let mut module: Module = root.clone();
            module.extend(
                rel.components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned()),
            );
            if module.len() > root.len() && module.last().is_some_and(|l| l == "mod" || l == "lib")
            {
                module.pop();
            }
            let shown = match root.is_empty() {
                true => file.strip_prefix(dir).unwrap(),
                false => file.strip_prefix(workspace()).unwrap(),
            };
            let shown = shown.display().to_string();
            let text = fs::read_to_string(&file).unwrap();
            let text = without_inline_tests(&text);
            Source {
                root: root.clone(),
                module,
                shown,
                text,
            }
        })
        .collect()
}

/// The text before an inline `#[cfg(test)] mod tests {` (attributes between allowed): tests import what
/// they test with `use super::*`, which is not an arrow of the program.
fn without_inline_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.trim() != "#[cfg(test)]" {
            continue;
        }
        let next = lines[i + 1..]
            .iter()
            .find(|n| !n.trim_start().starts_with("#["))
            .map(|n| n.trim());
        if next.is_some_and(|n| n.contains("mod ") && n.ends_with('{')) {
            return lines[..i].join("\n");
        }
    }
    text.to_string()
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Files declared as `#[cfg(test)] mod x;` by their parent.
fn test_only_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for f in files {
        let text = fs::read_to_string(f).unwrap();
        let dir = child_dir(f);
        let lines: Vec<&str> = text.lines().collect();
        for w in lines.windows(2) {
            if w[0].trim() == "#[cfg(test)]"
                && let Some(name) = w[1]
                    .trim()
                    .strip_prefix("mod ")
                    .and_then(|r| r.strip_suffix(';'))
            {
                out.insert(dir.join(format!("{name}.rs")));
                out.insert(dir.join(name).join("mod.rs"));
            }
        }
    }
    out
}

/// Where the children of the module in file `f` live.
fn child_dir(f: &Path) -> PathBuf {
    let name = f.file_stem().unwrap().to_string_lossy();
    let parent = f.parent().unwrap().to_path_buf();
    if name == "mod" || name == "lib" || name == "main" {
        parent
    } else {
        parent.join(&*name)
    }
}

/// Paths a text names: `crate::a::b::{c, d::e}` in `use` items and `crate::a::b` inline, `super::`
/// and `self::` paths, and paths that start with one of the module's own children (`rules::check`), each
/// as segments relative to ibi's root (`crate::` is `root`).
fn referenced_paths(root: &Module, module: &Module, text: &str) -> Vec<Vec<String>> {
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    for (start, _) in code.match_indices("crate::") {
        if code[..start].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        expand(&code[start + "crate::".len()..], root.clone(), &mut out);
    }
    for (start, _) in code.match_indices("super::") {
        if code[..start].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let mut base = module.clone();
        let mut rest = &code[start..];
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        expand(rest, base, &mut out);
    }
    for child in child_modules(&code) {
        let needle = format!("{child}::");
        for (start, _) in code.match_indices(&needle) {
            let before = &code[..start];
            if before.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            expand(&code[start..], module.clone(), &mut out);
        }
    }
    for (start, _) in code.match_indices("self::") {
        if code[..start].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        expand(&code[start + "self::".len()..], module.clone(), &mut out);
    }
    out
}

/// Names of the modules a file declares (`mod x;`, `pub mod x;`), test modules included.
fn child_modules(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("pub(crate) mod "))
                .or_else(|| l.strip_prefix("mod "))?;
            l.strip_suffix(';').map(str::to_string)
        })
        .collect()
}

/// Expands one path (possibly a `{…}` group) starting at `text` onto `prefix`.
fn expand(text: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    let mut rest = text;
    loop {
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            if let Some(group) = rest.strip_prefix('{') {
                for part in split_group(group) {
                    // A trailing comma leaves an empty part, which names nothing.
                    if !part.trim().is_empty() {
                        expand(part.trim(), path.clone(), out);
                    }
                }
                return;
            }
            break;
        }
        path.push(rest[..end].to_string());
        rest = &rest[end..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    if !path.is_empty() {
        out.push(path);
    }
}

/// The top-level comma-separated parts of a `{…}` group (text after its `{`).
fn split_group(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                parts.push(&text[from..i]);
                return parts;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts
}

/// Re-exports of each module: name → the path it stands for (`pub use child::Name`).
fn reexports(sources: &[Source]) -> BTreeMap<Module, BTreeMap<String, Vec<String>>> {
    let mut map: BTreeMap<Module, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for s in sources {
        for line in s.text.split(';') {
            let l = line.trim();
            let Some(body) = l
                .strip_prefix("pub use ")
                .or_else(|| l.strip_prefix("pub(crate) use "))
            else {
                continue;
            };
            let mut paths = Vec::new();
            let body = body.trim();
            let (base, body) = match body.strip_prefix("crate::") {
                Some(b) => (s.root.clone(), b),
                None => match body.strip_prefix("self::") {
                    Some(b) => (s.module.clone(), b),
                    None => (s.module.clone(), body),
                },
            };
            expand(body, base, &mut paths);
            for p in paths {
                if let Some(name) = p.last() {
                    let name = name.clone();
                    map.entry(s.module.clone()).or_default().insert(name, p);
                }
            }
        }
    }
    map
}

/// The module a path lands in: its deepest existing module prefix, through re-exports.
fn resolve(
    path: &[String],
    modules: &BTreeSet<Module>,
    reexports: &BTreeMap<Module, BTreeMap<String, Vec<String>>>,
    depth: usize,
) -> Option<Module> {
    let mut best: Option<usize> = None;
    for n in (1..=path.len()).rev() {
        if modules.contains(&path[..n].to_vec()) {
            best = Some(n);
            break;
        }
    }
    let n = best?;
    let module = path[..n].to_vec();
    if depth < 8
        && let Some(item) = path.get(n)
        && let Some(target) = reexports.get(&module).and_then(|r| r.get(item))
        && target.as_slice() != path
    {
        return resolve(target, modules, reexports, depth + 1).or(Some(module));
    }
    Some(module)
}

/// Arrows between modules: (from, to) → one example (file, path) per arrow.
fn arrows(sources: &[Source]) -> BTreeMap<(Module, Module), String> {
    let modules: BTreeSet<Module> = sources.iter().map(|s| s.module.clone()).collect();
    let re = reexports(sources);
    let mut out = BTreeMap::new();
    for s in sources {
        for path in referenced_paths(&s.root, &s.module, &s.text) {
            let Some(to) = resolve(&path, &modules, &re, 0) else {
                continue;
            };
            // A module's own children, and its crate's root, are not arrows.
            if to == s.module
                || to.is_empty()
                || to == s.root
                || to.starts_with(&s.module) && !is_pub_use_of(s, &to)
            {
                continue;
            }
            let from = s.module.clone();
            out.entry((from, to))
                .or_insert_with(|| format!("{}: {}", s.shown, path.join("::")));
        }
    }
    out
}

/// Whether module `s` re-exports from its descendant `to` (a facade importing its child).
fn is_pub_use_of(s: &Source, to: &Module) -> bool {
    let child = &to[s.module.len()];
    s.text.contains(&format!("pub use {child}::"))
        || s.text.contains(&format!("pub(crate) use {child}::"))
}

/// Strongly connected components with more than one member (Tarjan).
fn cycles<N: Ord + Clone>(edges: &BTreeSet<(N, N)>) -> Vec<Vec<N>> {
    let nodes: BTreeSet<N> = edges
        .iter()
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect();
    let nodes: Vec<N> = nodes.into_iter().collect();
    let index_of = |n: &N| nodes.binary_search(n).unwrap();
    let mut adj = vec![Vec::new(); nodes.len()];
    for (a, b) in edges {
        adj[index_of(a)].push(index_of(b));
    }
    let mut state = Tarjan {
        adj,
        index: vec![None; nodes.len()],
        low: vec![0; nodes.len()],
        on_stack: vec![false; nodes.len()],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in 0..nodes.len() {
        if state.index[v].is_none() {
            state.visit(v);
        }
    }
    state
        .found
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| c.into_iter().map(|i| nodes[i].clone()).collect())
        .collect()
}

struct Tarjan {
    adj: Vec<Vec<usize>>,
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    next: usize,
    found: Vec<Vec<usize>>,
}

impl Tarjan {
    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.next);
        self.low[v] = self.next;
        self.next += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
        for w in self.adj[v].clone() {
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(i) if self.on_stack[w] => self.low[v] = self.low[v].min(i),
                _ => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            self.found.push(comp);
        }
    }
}

fn show(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

fn floor_of(room: &str) -> Option<usize> {
    FLOORS.iter().position(|f| f.contains(&room))
}

#[test]
fn no_module_imports_in_a_circle() {
    let arrows = arrows(&sources());
    let edges: BTreeSet<(Module, Module)> = arrows.keys().cloned().collect();
    let found = cycles(&edges);
    let mut report = String::new();
    for c in &found {
        report.push_str(&format!(
            "circle: {}\n",
            c.iter().map(show).collect::<Vec<_>>().join(", ")
        ));
        for ((a, b), why) in &arrows {
            if c.contains(a) && c.contains(b) {
                report.push_str(&format!("  {} -> {}  ({why})\n", show(a), show(b)));
            }
        }
    }
    assert!(found.is_empty(), "module cycles:\n{report}");
}

#[test]
fn rooms_import_only_downwards() {
    let arrows = arrows(&sources());
    let mut bad = Vec::new();
    let mut room_edges = BTreeSet::new();
    for ((a, b), why) in &arrows {
        let (ra, rb) = (a[0].as_str(), b[0].as_str());
        if ra == rb {
            continue;
        }
        room_edges.insert((ra.to_string(), rb.to_string()));
        match (floor_of(ra), floor_of(rb)) {
            (Some(fa), Some(fb)) if fb > fa || (fb == fa && SIDEWAYS.contains(&(ra, rb))) => {}
            (Some(_), Some(_)) => bad.push(format!("{ra} -> {rb}  ({why})")),
            _ => bad.push(format!("{ra} -> {rb}: a room missing from FLOORS ({why})")),
        }
    }
    let circles = cycles(&room_edges);
    assert!(circles.is_empty(), "room cycles: {circles:?}");
    assert!(
        bad.is_empty(),
        "arrows that do not point down:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_reader_finds_paths_and_cycles() {
    let m: Module = vec!["a".into(), "b".into()];
    let paths = referenced_paths(
        &Vec::new(),
        &m,
        "use crate::x::{y::Z, w};\nuse super::c::D;\nfn f() { crate::u::v(); }\n// crate::not::this\n",
    );
    let shown: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(shown, ["x::y::Z", "x::w", "u::v", "a::c::D"]);
    let edges: BTreeSet<(u8, u8)> = [(1, 2), (2, 3), (3, 1), (3, 4)].into();
    assert_eq!(cycles(&edges).len(), 1);
    let acyclic: BTreeSet<(u8, u8)> = [(1, 2), (2, 3), (1, 3)].into();
    assert!(cycles(&acyclic).is_empty());
}

/// A file that declares child modules (test children aside) holds nothing else but `use` lines and its
/// doc comment: the items live in the children (issue 12's facade rule). Only the crate roots, whose
/// job is the entry point, are exempt.
#[test]
fn facades_only_declare() {
    let mut bad = Vec::new();
    for s in sources() {
        let rel = s.shown.clone();
        if rel == "main.rs" || s.module == s.root {
            continue;
        }
        let children: Vec<String> = s
            .text
            .lines()
            .zip(std::iter::once("").chain(s.text.lines()))
            .filter(|(l, prev)| prev.trim() != "#[cfg(test)]" && l.trim().ends_with(';'))
            .filter_map(|(l, _)| {
                let l = l.trim();
                l.strip_prefix("pub mod ")
                    .or_else(|| l.strip_prefix("pub(crate) mod "))
                    .or_else(|| l.strip_prefix("mod "))
                    .map(str::to_string)
            })
            .collect();
        if children.is_empty() {
            continue;
        }
        let items: Vec<&str> = s
            .text
            .lines()
            .map(str::trim)
            .filter(|l| {
                let l = l
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub(super) ")
                    .trim_start_matches("pub ");
                [
                    "fn ", "struct ", "enum ", "const ", "static ", "impl", "type ", "trait ",
                ]
                .iter()
                .any(|k| l.starts_with(k))
            })
            .collect();
        if !items.is_empty() {
            bad.push(format!("{rel}: {}", items.join(" | ")));
        }
    }
    assert!(bad.is_empty(), "facades with items:\n{}", bad.join("\n"));
}
