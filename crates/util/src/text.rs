//! Text for messages: a server's error text kept short enough for one line of an error, and text a
//! host, a BMC or a cluster sent made safe to print on a terminal.

/// The first `max_chars` characters of `text`, with `…` when some were cut (never inside a
/// character, whatever the encoding's widths).
pub fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// `text` with every control character (C0, DEL, C1: escape sequences, carriage returns, newlines,
/// bells) and every character that [`reorders`] a line written out as `\x1b`, `\n`, `\u{9b}`,
/// `\u{202e}`, so text from outside (a host's report, a BMC's or a cluster's error) cannot move the
/// cursor, clear the screen, retitle the terminal, forge a line of output or reorder the rest of
/// its line. Everything else, backslashes included, is kept as it is.
pub fn escape_control(text: &str) -> String {
    escape(text, false)
}

/// [`escape_control`] but for newlines, which stay: for a message of several lines (an error with
/// a tool's output appended), where a line break moves no cursor anywhere it should not.
pub fn escape_control_but_newlines(text: &str) -> String {
    escape(text, true)
}

/// The format characters that reorder the text around them (the bidirectional marks, embeddings,
/// overrides and isolates) or break its line (U+2028, U+2029), though `char::is_control` says no:
/// text from outside must not disguise the rest of its line (Trojan source, CVE-2021-42574) on a
/// terminal or in a page.
fn reorders(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            | '\u{2028}' | '\u{2029}'
    )
}

fn escape(text: &str, keep_newlines: bool) -> String {
    let unsafe_char = |c: char| (c.is_control() && !(keep_newlines && c == '\n')) || reorders(c);
    if !text.chars().any(unsafe_char) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' if keep_newlines => out.push('\n'),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() || reorders(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_written_out() {
        assert_eq!(escape_control("plain \\ text é"), "plain \\ text é");
        assert_eq!(
            escape_control("\x1b[2J\x1b]0;owned\x07x\ny\r\t\u{9b}31m\x7f"),
            "\\x1b[2J\\x1b]0;owned\\x07x\\ny\\r\\t\\u{9b}31m\\x7f"
        );
        assert_eq!(
            escape_control_but_newlines("a\x1b[2J\nb\r\n"),
            "a\\x1b[2J\nb\\r\n"
        );
    }

    /// Trojan-source text (CVE-2021-42574): a host's name or error that reorders what follows it on
    /// the line, or breaks the line where a terminal or a browser would, is written out too.
    #[test]
    fn bidi_controls_and_line_separators_are_written_out() {
        assert_eq!(
            escape_control(
                "a\u{202e}txt.exe\u{202c} \u{2066}\u{2069}\u{200f}\u{61c}b\u{2028}c\u{2029}"
            ),
            "a\\u{202e}txt.exe\\u{202c} \\u{2066}\\u{2069}\\u{200f}\\u{61c}b\\u{2028}c\\u{2029}"
        );
        assert_eq!(
            escape_control_but_newlines("x\u{202e}y\nz"),
            "x\\u{202e}y\nz"
        );
        // Other format characters (a zero-width joiner in an emoji) stay.
        assert_eq!(
            escape_control("\u{1f469}\u{200d}\u{1f4bb}"),
            "\u{1f469}\u{200d}\u{1f4bb}"
        );
    }

    #[test]
    fn clipping_counts_characters_and_marks_the_cut() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc…");
        assert_eq!(clip(&"é".repeat(5), 2), "éé…");
        assert_eq!(clip("", 0), "");
    }
}
