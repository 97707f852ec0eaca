//! Text for messages: a server's error text kept short enough for one line of an error.

/// The first `max_chars` characters of `text`, with `…` when some were cut (never inside a
/// character, whatever the encoding's widths).
pub fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_counts_characters_and_marks_the_cut() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc…");
        assert_eq!(clip(&"é".repeat(5), 2), "éé…");
        assert_eq!(clip("", 0), "");
    }
}
