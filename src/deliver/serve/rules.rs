//! The HTTP semantics `serve` implements, as pure functions: single byte ranges (RFC 9110 §14)
//! and the entity-tag conditionals `If-None-Match` and `If-Range` (§13). Multi-range requests are
//! answered whole, which §14.2 allows; BMCs and curl never send them.

/// What a `Range` header asks of a representation of `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeAsk {
    /// No range, or one we answer whole (malformed, several ranges, another unit).
    Full,
    /// Bytes `start..=end`.
    Part { start: u64, end: u64 },
    /// A syntactically valid range outside the representation: 416.
    Unsatisfiable,
}

pub fn parse_range(header: Option<&str>, size: u64) -> RangeAsk {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return RangeAsk::Full;
    };
    if spec.contains(',') {
        return RangeAsk::Full;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return RangeAsk::Full;
    };
    let number = |s: &str| {
        let s = s.trim();
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            None
        } else {
            s.parse::<u64>().ok()
        }
    };
    match (first.trim().is_empty(), number(first), number(last)) {
        // bytes=-N: the last N bytes.
        (true, _, Some(n)) => match (n, size) {
            (0, _) | (_, 0) => RangeAsk::Unsatisfiable,
            _ => RangeAsk::Part {
                start: size.saturating_sub(n),
                end: size - 1,
            },
        },
        (false, Some(start), None) if last.trim().is_empty() => bounded(start, u64::MAX, size),
        (false, Some(start), Some(end)) if start <= end => bounded(start, end, size),
        _ => RangeAsk::Full,
    }
}

fn bounded(start: u64, end: u64, size: u64) -> RangeAsk {
    if start >= size {
        RangeAsk::Unsatisfiable
    } else {
        RangeAsk::Part {
            start,
            end: end.min(size - 1),
        }
    }
}

/// Whether `header` (a list of entity tags, or `*`) names `etag`. `weak` allows `W/` tags to match
/// (If-None-Match); strong comparison (If-Range) never matches a weak tag.
pub fn etag_listed(header: &str, etag: &str, weak: bool) -> bool {
    if header.trim() == "*" {
        return true;
    }
    header
        .split(',')
        .map(str::trim)
        .any(|tag| match tag.strip_prefix("W/") {
            Some(t) => weak && t == etag,
            None => tag == etag,
        })
}

/// `If-Range`: the range applies only if the validator is our (strong) ETag. A date never
/// matches: we send no `Last-Modified`, so a client cannot hold a date that proves anything.
pub fn if_range_holds(header: Option<&str>, etag: &str) -> bool {
    match header {
        None => true,
        Some(v) => {
            let v = v.trim();
            !v.starts_with("W/") && v == etag
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_as_rfc_9110_reads_them() {
        use RangeAsk::*;
        let cases = [
            (None, 100, Full),
            (Some("bytes=0-9"), 100, Part { start: 0, end: 9 }),
            (Some("bytes=90-"), 100, Part { start: 90, end: 99 }),
            (Some("bytes=90-1000"), 100, Part { start: 90, end: 99 }),
            (Some("bytes=-10"), 100, Part { start: 90, end: 99 }),
            (Some("bytes=-1000"), 100, Part { start: 0, end: 99 }),
            (Some("bytes=100-"), 100, Unsatisfiable),
            (Some("bytes=100-200"), 100, Unsatisfiable),
            (Some("bytes=-0"), 100, Unsatisfiable),
            (Some("bytes=0-0"), 0, Unsatisfiable),
            (Some("bytes=-5"), 0, Unsatisfiable),
            (Some("bytes=9-3"), 100, Full),
            (Some("bytes=0-1,5-6"), 100, Full),
            (Some("items=0-1"), 100, Full),
            (Some("bytes=a-b"), 100, Full),
            (Some("bytes=+1-2"), 100, Full),
            (Some("bytes=5"), 100, Full),
            (Some("bytes=18446744073709551615-"), 100, Unsatisfiable),
        ];
        for (h, size, want) in cases {
            assert_eq!(parse_range(h, size), want, "{h:?} of {size}");
        }
    }

    #[test]
    fn entity_tags_compare_weakly_or_strongly() {
        let e = "\"abc\"";
        assert!(etag_listed("\"x\", \"abc\"", e, true));
        assert!(etag_listed("*", e, false));
        assert!(etag_listed("W/\"abc\"", e, true));
        assert!(!etag_listed("W/\"abc\"", e, false));
        assert!(!etag_listed("\"abd\"", e, true));
        assert!(if_range_holds(None, e));
        assert!(if_range_holds(Some("\"abc\""), e));
        assert!(!if_range_holds(Some("W/\"abc\""), e));
        assert!(!if_range_holds(Some("Wed, 21 Oct 2015 07:28:00 GMT"), e));
    }
}
