//! Quoting for the YAML 1.1 readers of the YAML ibi writes. serde_yaml_ng emits YAML 1.2, where `on`,
//! `off`, `yes`, `no`, `y` and `n` are plain strings, and writes them unquoted; a YAML 1.1 reader (Go's
//! yaml.v2, PyYAML, older nmstate) reads them as booleans, so an interface named `on` or a value `no`
//! would change meaning on the way to the host. [`quote_booleans`] single-quotes such scalars in
//! serde_yaml_ng's block output, keys and values alike, and leaves every other byte as it was.

/// YAML 1.1's boolean words that YAML 1.2 reads as strings (`true`/`false` are quoted already).
const YAML11_BOOLEANS: [&str; 16] = [
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
    "OFF",
];

/// `yaml` (block style, as serde_yaml_ng writes it) with every plain scalar that YAML 1.1 reads as a
/// boolean single-quoted. Block scalars (`|`, `>`) are copied untouched.
pub(crate) fn quote_booleans(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len());
    // Lines indented deeper than this column belong to a block scalar.
    let mut block_over: Option<usize> = None;
    for line in yaml.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let indent = body.len() - body.trim_start_matches(' ').len();
        if block_over.is_some_and(|col| body.trim().is_empty() || indent > col) {
            out.push_str(line);
            continue;
        }
        // Past the block (if any): this line may open the next one.
        let (quoted, block) = quote_line(body, indent);
        block_over = block;
        out.push_str(&quoted);
        out.push_str(&line[body.len()..]);
    }
    out
}

/// One line: `INDENT (- )* [KEY:[ VALUE]] | [SCALAR]`. Returns the line and, when it opens a block
/// scalar, the column its content is indented past.
fn quote_line(body: &str, indent: usize) -> (String, Option<usize>) {
    let mut rest = &body[indent..];
    let mut dashes = 0;
    while let Some(r) = rest.strip_prefix("- ") {
        rest = r;
        dashes += 1;
    }
    let head = &body[..body.len() - rest.len()];
    // A key's block content is indented past the key; an item's past its dash.
    let (text, scalar, owner_col) = match split_key(rest) {
        Some((key, value)) => {
            let value_part = value.map_or(String::new(), |v| format!(" {}", quote(v)));
            let text = format!("{}:{value_part}", quote(key));
            (text, value.unwrap_or(""), indent + 2 * dashes)
        }
        None => (quote(rest), rest, (indent + 2 * dashes).saturating_sub(2)),
    };
    let block = scalar.starts_with(['|', '>']).then_some(owner_col);
    (format!("{head}{text}"), block)
}

/// `KEY: VALUE` or `KEY:` with a plain key; `None` for a scalar, a flow collection or a quoted key
/// (whose quotes may hide `: `).
fn split_key(rest: &str) -> Option<(&str, Option<&str>)> {
    if rest.starts_with(['\'', '"', '[', '{']) {
        return None;
    }
    if let Some(key) = rest.strip_suffix(':') {
        return (!key.contains(": ")).then_some((key, None));
    }
    rest.split_once(": ").map(|(k, v)| (k, Some(v)))
}

fn quote(scalar: &str) -> String {
    if YAML11_BOOLEANS.contains(&scalar) {
        format!("'{scalar}'")
    } else {
        scalar.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_keys_values_and_items_but_not_block_scalars() {
        let v = serde_json::json!({
            "a": ["on", "y", "No", "x: on", "line1\non\n", "true", "yes "],
            "on": {"off": "n"},
            "list": [["y"]],
            "e": [],
            "multi": "a\nno",
            "k": [{"name": "Y", "text": "one\nON\n", "v": "ON"}],
            "interfaces": [{"name": "eth0", "state": "up"}]
        });
        let plain = serde_yaml_ng::to_string(&v).unwrap();
        let got = quote_booleans(&plain);
        // serde_json keeps insertion order here (nmstate enables its preserve_order).
        let want = "a:\n- 'on'\n- 'y'\n- 'No'\n- 'x: on'\n- |\n  line1\n  on\n- 'true'\n- 'yes '\n'on':\n  'off': 'n'\nlist:\n- - 'y'\ne: []\nmulti: |-\n  a\n  no\nk:\n- name: 'Y'\n  text: |\n    one\n    ON\n  v: 'ON'\ninterfaces:\n- name: eth0\n  state: up\n";
        assert_eq!(got, want, "from:\n{plain}");
        let back: serde_json::Value = serde_yaml_ng::from_str(&got).unwrap();
        assert_eq!(back, v, "the same document for a YAML 1.2 reader");
    }

    #[test]
    fn nothing_to_quote_leaves_the_text_alone() {
        let text = "interfaces:\n- ipv4:\n    enabled: true\n  name: eth0\n";
        assert_eq!(quote_booleans(text), text);
    }
}
