//! Where each key of a YAML document is: the field path findings use (`hostname`,
//! `networkConfig.interfaces[0].mac-address`, `sites[2].nic`) mapped to its line and, for a scalar, its
//! text. serde decodes values without positions, so a finding that must name a line (a template's
//! placeholder, an inventory entry) looks it up here.
//!
//! Built from libyaml's event stream (the `unsafe-libyaml` port serde_yaml_ng parses with), so the
//! lines are the ones the decoder saw. Best effort: a syntax error or a complex key ends or skips the
//! walk quietly (the decoder reports it); only the first document is read.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;

/// One key (or sequence item): the 1-based line it starts on and, when its value is a scalar, the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub line: usize,
    pub scalar: Option<String>,
}

/// Every key path of one document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct YamlLines {
    nodes: BTreeMap<String, Node>,
}

impl YamlLines {
    /// Indexes `text`; empty when it is not YAML the walk can read.
    pub fn parse(text: &str) -> YamlLines {
        // The scanner is quadratic in flow nesting (util::yaml): refuse what the decoder refuses.
        if super::yaml::check_flow_depth(text.as_bytes()).is_err() {
            return YamlLines::default();
        }
        let mut walker = Walker::default();
        events(text.as_bytes(), |e| walker.on(e));
        YamlLines {
            nodes: walker.nodes,
        }
    }

    /// The line of the key (or item) at `path`.
    pub fn line(&self, path: &str) -> Option<usize> {
        self.nodes.get(path).map(|n| n.line)
    }

    /// The node at `path`.
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    /// The nodes whose path matches `pattern`, where `[*]` stands for any sequence index.
    pub fn matching<'a>(&'a self, pattern: &'a str) -> impl Iterator<Item = (&'a str, &'a Node)> {
        self.nodes
            .iter()
            .filter(move |(p, _)| path_matches(pattern, p))
            .map(|(p, n)| (p.as_str(), n))
    }
}

/// `pattern` equals `path` with each `[*]` standing for one `[<digits>]`.
fn path_matches(pattern: &str, path: &str) -> bool {
    let Some((head, rest)) = pattern.split_once("[*]") else {
        return pattern == path;
    };
    let Some(after) = path.strip_prefix(head).and_then(|p| p.strip_prefix('[')) else {
        return false;
    };
    let digits = after.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && after[digits..]
            .strip_prefix(']')
            .is_some_and(|tail| path_matches(rest, tail))
}

/// The parser events the walk needs, with 1-based lines.
enum Event {
    MappingStart(usize),
    SequenceStart(usize),
    End,
    Scalar(usize, String),
    Alias(usize),
}

enum Frame {
    Mapping { key: Key },
    Sequence { next: usize },
}

/// Where a mapping is: before a key, after a plain key, or after a complex key (whose value is
/// skipped as well, having no path).
enum Key {
    Expected,
    Named(String),
    Skipped,
}

/// Turns events into paths: the stack of open collections and, per level, the path component.
#[derive(Default)]
struct Walker {
    frames: Vec<Frame>,
    /// The path of each open collection (empty for the root).
    paths: Vec<String>,
    /// Depth of a collection being skipped (a complex key, or the value of one).
    skipping: usize,
    nodes: BTreeMap<String, Node>,
}

impl Walker {
    fn on(&mut self, e: Event) {
        if self.skipping > 0 {
            match e {
                Event::MappingStart(_) | Event::SequenceStart(_) => self.skipping += 1,
                Event::End => {
                    self.skipping -= 1;
                    if self.skipping == 0 {
                        self.skipped();
                    }
                }
                _ => {}
            }
            return;
        }
        match e {
            Event::Scalar(line, text) => self.scalar(line, text),
            Event::Alias(line) => self.value(line, None),
            Event::MappingStart(line) => self.open(line, Frame::Mapping { key: Key::Expected }),
            Event::SequenceStart(line) => self.open(line, Frame::Sequence { next: 0 }),
            Event::End => {
                self.frames.pop();
                self.paths.pop();
                self.value_done();
            }
        }
    }

    fn scalar(&mut self, line: usize, text: String) {
        match self.frames.last_mut() {
            Some(Frame::Mapping {
                key: key @ Key::Expected,
            }) => {
                let parent = self.paths.last().map(String::as_str).unwrap_or_default();
                let path = join(parent, &text);
                self.nodes.insert(path, Node { line, scalar: None });
                *key = Key::Named(text);
            }
            Some(Frame::Mapping { key: Key::Skipped }) => self.value_done(),
            _ => self.value(line, Some(text)),
        }
    }

    /// A scalar or alias in value position.
    fn value(&mut self, line: usize, scalar: Option<String>) {
        if let Some(path) = self.value_path() {
            let node = self
                .nodes
                .entry(path)
                .or_insert(Node { line, scalar: None });
            node.scalar = scalar;
        }
        self.value_done();
    }

    fn open(&mut self, line: usize, frame: Frame) {
        if let Some(Frame::Mapping {
            key: Key::Expected | Key::Skipped,
        }) = self.frames.last()
        {
            self.skipping = 1;
            return;
        }
        let path = self.value_path().unwrap_or_default();
        if !path.is_empty() {
            self.nodes
                .entry(path.clone())
                .or_insert(Node { line, scalar: None });
        }
        self.frames.push(frame);
        self.paths.push(path);
    }

    /// A skipped collection ended: after a complex key its value is skipped too; after that value,
    /// the next scalar is a key again.
    fn skipped(&mut self) {
        if let Some(Frame::Mapping { key }) = self.frames.last_mut() {
            *key = match key {
                Key::Expected => Key::Skipped,
                _ => Key::Expected,
            };
        }
    }

    /// The path of the value about to start (advancing a sequence's index); `None` at the root.
    fn value_path(&mut self) -> Option<String> {
        let parent = self.paths.last().cloned().unwrap_or_default();
        match self.frames.last_mut()? {
            Frame::Mapping { key: Key::Named(k) } => Some(join(&parent, k)),
            Frame::Mapping { .. } => None,
            Frame::Sequence { next } => {
                *next += 1;
                Some(format!("{parent}[{}]", *next - 1))
            }
        }
    }

    /// A mapping's value is complete: the next scalar is a key again.
    fn value_done(&mut self) {
        if let Some(Frame::Mapping { key }) = self.frames.last_mut() {
            *key = Key::Expected;
        }
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// Feeds the events of the first document of `input` to `f`, stopping at its end or at an error.
fn events(input: &[u8], mut f: impl FnMut(Event)) {
    use unsafe_libyaml as unsafe_y;
    let mut parser = MaybeUninit::<unsafe_y::yaml_parser_t>::uninit();
    let parser = parser.as_mut_ptr();
    // SAFETY: as in util::yaml: `parser` points at storage that `yaml_parser_initialize` sets up, and
    // it is deleted before returning while `input` is still borrowed. Each event is deleted right after
    // its type, mark and (for a scalar) value bytes are copied out; a scalar's `value` points at
    // `length` bytes owned by the event until then.
    unsafe {
        if unsafe_y::yaml_parser_initialize(parser).fail {
            return;
        }
        unsafe_y::yaml_parser_set_input_string(parser, input.as_ptr(), input.len() as u64);
        loop {
            let mut event = MaybeUninit::<unsafe_y::yaml_event_t>::uninit();
            if unsafe_y::yaml_parser_parse(parser, event.as_mut_ptr()).fail {
                break;
            }
            let event = event.as_mut_ptr();
            let line = (*event).start_mark.line as usize + 1;
            let kind = (*event).type_;
            let scalar = (kind == unsafe_y::YAML_SCALAR_EVENT).then(|| {
                let s = (*event).data.scalar;
                let bytes = std::slice::from_raw_parts(s.value, s.length as usize);
                String::from_utf8_lossy(bytes).into_owned()
            });
            unsafe_y::yaml_event_delete(event);
            let e = match kind {
                unsafe_y::YAML_MAPPING_START_EVENT => Event::MappingStart(line),
                unsafe_y::YAML_SEQUENCE_START_EVENT => Event::SequenceStart(line),
                unsafe_y::YAML_MAPPING_END_EVENT | unsafe_y::YAML_SEQUENCE_END_EVENT => Event::End,
                unsafe_y::YAML_SCALAR_EVENT => Event::Scalar(line, scalar.unwrap_or_default()),
                unsafe_y::YAML_ALIAS_EVENT => Event::Alias(line),
                unsafe_y::YAML_DOCUMENT_END_EVENT
                | unsafe_y::YAML_STREAM_END_EVENT
                | unsafe_y::YAML_NO_EVENT => break,
                _ => continue,
            };
            f(e);
        }
        unsafe_y::yaml_parser_delete(parser);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
# comment
hostname: change-to-hostname
networkConfig:
  interfaces:
    - name: eth0
      mac-address: 00:00:00:00:00:00
    - {name: eth1, mac-address: 52:54:00:aa:17:01}
nodeLabels:
  node-role.kubernetes.io/edge: \"\"
sshKey: |
  line one
  line two
sites: [[a, b], c]
? [complex, key]
: ignored
after: 1
";

    #[test]
    fn paths_lines_and_scalars() {
        let ix = YamlLines::parse(DOC);
        let at = |p: &str| ix.get(p).map(|n| (n.line, n.scalar.clone()));
        let s = |v: &str| Some(v.to_string());
        assert_eq!(at("hostname"), Some((2, s("change-to-hostname"))));
        assert_eq!(at("networkConfig"), Some((3, None)));
        assert_eq!(at("networkConfig.interfaces[0]"), Some((5, None)));
        assert_eq!(
            at("networkConfig.interfaces[0].mac-address"),
            Some((6, s("00:00:00:00:00:00")))
        );
        assert_eq!(
            at("networkConfig.interfaces[1].mac-address"),
            Some((7, s("52:54:00:aa:17:01")))
        );
        assert_eq!(
            at("nodeLabels.node-role.kubernetes.io/edge"),
            Some((9, s("")))
        );
        assert_eq!(at("sshKey"), Some((10, s("line one\nline two\n"))));
        assert_eq!(at("sites[0][1]"), Some((13, s("b"))));
        assert_eq!(at("sites[1]"), Some((13, s("c"))));
        assert_eq!(at("after"), Some((16, s("1"))));
        assert_eq!(ix.line("ignored"), None);
    }

    #[test]
    fn patterns_match_any_index() {
        let ix = YamlLines::parse(DOC);
        let found: Vec<&str> = ix
            .matching("networkConfig.interfaces[*].mac-address")
            .map(|(p, _)| p)
            .collect();
        assert_eq!(
            found,
            [
                "networkConfig.interfaces[0].mac-address",
                "networkConfig.interfaces[1].mac-address"
            ]
        );
        assert!(!path_matches("a[*].b", "a[].b"));
        assert!(!path_matches("a[*].b", "a[1].bc"));
        assert!(path_matches("a[*][*]", "a[1][22]"));
    }

    #[test]
    fn broken_or_deep_documents_give_what_was_read() {
        let ix = YamlLines::parse("a: 1\nb: [unclosed\n");
        assert_eq!(ix.line("a"), Some(1));
        let deep = format!("k: {}{}\n", "[".repeat(200), "]".repeat(200));
        assert_eq!(YamlLines::parse(&deep), YamlLines::default());
    }
}
