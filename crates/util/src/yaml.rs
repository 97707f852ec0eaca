//! A guard to call before `serde_yaml_ng` decodes text a user supplied. serde_yaml_ng wraps libyaml's
//! scanner (the `unsafe-libyaml` port), which walks its whole stack of open flow collections on every
//! token, so a document of nested `[` or `{` costs time quadratic in its length: 40 KiB took 7 s, and
//! a megabyte would take hours, all before serde_yaml_ng's recursion limit rejects it (a hand-made
//! input of the config decoders' fuzz target, see docs/fuzzing.md). Scanning the tokens once here,
//! stopping at the first collection nested deeper than that same limit, keeps the cost linear;
//! anything shallower is left to serde_yaml_ng, which reports its own errors with their positions.

use std::mem::MaybeUninit;

/// serde_yaml_ng's recursion limit: nothing nested deeper can decode anyway.
pub(crate) const MAX_FLOW_DEPTH: usize = 128;

/// Flow collections nested deeper than [`MAX_FLOW_DEPTH`], and where the first such one starts
/// (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("flow collections nested deeper than {MAX_FLOW_DEPTH} at line {line} column {column}")]
pub struct TooDeep {
    pub line: u64,
    pub column: u64,
}

/// An error when the YAML `input` nests flow collections deeper than [`MAX_FLOW_DEPTH`], naming where.
pub fn check_flow_depth(input: &[u8]) -> Result<(), TooDeep> {
    // Fewer opening brackets than the limit cannot nest past it: the common case skips the scan.
    let opens = input.iter().filter(|b| matches!(b, b'[' | b'{')).count();
    if opens <= MAX_FLOW_DEPTH {
        return Ok(());
    }
    match deepest_flow(input) {
        Some(mark) => Err(TooDeep {
            line: mark.line + 1,
            column: mark.column + 1,
        }),
        None => Ok(()),
    }
}

/// The start of the first flow collection nested deeper than the limit, if any. A scanner error
/// ends the scan quietly: serde_yaml_ng finds and reports it.
fn deepest_flow(input: &[u8]) -> Option<unsafe_libyaml::yaml_mark_t> {
    let mut parser = MaybeUninit::<unsafe_libyaml::yaml_parser_t>::uninit();
    let parser = parser.as_mut_ptr();
    // SAFETY: `parser` points at storage for one parser, which `yaml_parser_initialize` zeroes and
    // sets up; it is deleted before returning, while `input` (borrowed for the whole function) is
    // still alive, as `yaml_parser_set_input_string` requires. Each token is deleted right after its
    // type and mark are copied out.
    unsafe {
        if unsafe_libyaml::yaml_parser_initialize(parser).fail {
            return None;
        }
        unsafe_libyaml::yaml_parser_set_input_string(parser, input.as_ptr(), input.len() as u64);
        let mut depth = 0usize;
        let mut found = None;
        loop {
            let mut token = MaybeUninit::<unsafe_libyaml::yaml_token_t>::uninit();
            if unsafe_libyaml::yaml_parser_scan(parser, token.as_mut_ptr()).fail {
                break;
            }
            let token = token.as_mut_ptr();
            let (kind, mark) = ((*token).type_, (*token).start_mark);
            unsafe_libyaml::yaml_token_delete(token);
            match kind {
                unsafe_libyaml::YAML_FLOW_SEQUENCE_START_TOKEN
                | unsafe_libyaml::YAML_FLOW_MAPPING_START_TOKEN => {
                    depth += 1;
                    if depth > MAX_FLOW_DEPTH {
                        found = Some(mark);
                        break;
                    }
                }
                unsafe_libyaml::YAML_FLOW_SEQUENCE_END_TOKEN
                | unsafe_libyaml::YAML_FLOW_MAPPING_END_TOKEN => {
                    depth = depth.saturating_sub(1);
                }
                unsafe_libyaml::YAML_STREAM_END_TOKEN | unsafe_libyaml::YAML_NO_TOKEN => break,
                _ => {}
            }
        }
        unsafe_libyaml::yaml_parser_delete(parser);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn deep_flow_nesting_is_refused_in_linear_time() {
        for (open, close) in [("[", "]"), ("{a: ", "}")] {
            let text = format!("k: {}{}\n", open.repeat(200_000), close.repeat(200_000));
            let start = Instant::now();
            let err = check_flow_depth(text.as_bytes()).unwrap_err().to_string();
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{:?}",
                start.elapsed()
            );
            assert!(
                err.contains("nested deeper than 128 at line 1 column"),
                "{err}"
            );
        }
    }

    #[test]
    fn ordinary_documents_pass() {
        let cases = [
            "a: 1\n".to_string(),
            // Brackets in scalars and comments, and many shallow collections, are not nesting.
            format!(
                "a: \"{}\"\n# {}\nb: '{}'\n",
                "[".repeat(500),
                "{".repeat(500),
                "[".repeat(500)
            ),
            format!("l: [{}]\n", vec!["[1, {a: b}]"; 500].join(", ")),
            format!(
                "k: {}{}\n",
                "[".repeat(MAX_FLOW_DEPTH),
                "]".repeat(MAX_FLOW_DEPTH)
            ),
            // Invalid YAML is serde_yaml_ng's to report.
            format!("a: \"unterminated {}\n", "[".repeat(300)),
        ];
        for text in &cases {
            assert_eq!(
                check_flow_depth(text.as_bytes()),
                Ok(()),
                "{}",
                &text[..text.len().min(60)]
            );
        }
    }
}
