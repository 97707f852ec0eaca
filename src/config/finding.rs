//! Validation findings of the input files: the collector the rules write to, strict decoding into
//! findings, and what a check of input files returns ([`Invalid`]). A finding itself and the error
//! carrying every finding of a pass are `util::finding`'s, where the host side reaches them too.

use crate::util::finding::{Finding, ValidationError};

/// Why a check of input files gave no value: the findings to fix (every one, at once), or an error
/// that stopped it (a file that cannot be read). Callers match on it instead of downcasting; it is
/// deliberately not a `std::error::Error`, so `?` into `anyhow` does not compile and every caller
/// says what it does with findings ([`Invalid::into_anyhow`] where a command renders them).
#[derive(Debug)]
pub enum Invalid {
    Findings(ValidationError),
    Failed(anyhow::Error),
}

impl Invalid {
    /// As `anyhow` carries it to the command, which prints a [`ValidationError`]'s findings one per
    /// line.
    pub fn into_anyhow(self) -> anyhow::Error {
        match self {
            Invalid::Findings(v) => v.into(),
            Invalid::Failed(e) => e,
        }
    }
}

impl From<ValidationError> for Invalid {
    fn from(v: ValidationError) -> Self {
        Invalid::Findings(v)
    }
}

/// Where untyped code meets typed: an `anyhow` error that carries findings is sorted here, the one
/// place that looks inside.
impl From<anyhow::Error> for Invalid {
    fn from(e: anyhow::Error) -> Self {
        match e.downcast::<ValidationError>() {
            Ok(v) => Invalid::Findings(v),
            Err(e) => Invalid::Failed(e),
        }
    }
}

/// Collects findings and warnings for one file.
#[derive(Debug)]
pub(crate) struct Findings {
    file: String,
    pub(crate) errors: Vec<Finding>,
    pub(crate) warnings: Vec<String>,
}

impl Findings {
    pub(crate) fn new(file: impl Into<String>) -> Self {
        Findings {
            file: file.into(),
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Records a finding about `field`.
    pub(crate) fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(Finding {
            file: self.file.clone(),
            field: field.into(),
            message: message.into(),
            line: None,
        });
    }

    /// Records a finding about `field`, at `line` of the file when known.
    pub(crate) fn add_at(
        &mut self,
        field: impl Into<String>,
        line: Option<usize>,
        message: impl Into<String>,
    ) {
        self.errors.push(Finding {
            file: self.file.clone(),
            field: field.into(),
            message: message.into(),
            line,
        });
    }

    /// Records a finding about the whole file.
    pub(crate) fn file_error(&mut self, message: impl Into<String>) {
        self.add("", message);
    }

    /// Records a warning about `field`, rendered like a finding.
    pub(crate) fn warn(&mut self, field: impl Into<String>, message: impl Into<String>) {
        let w = Finding {
            file: self.file.clone(),
            field: field.into(),
            message: message.into(),
            line: None,
        };
        self.warnings.push(w.to_string());
    }

    pub(crate) fn into_vec(self) -> Vec<Finding> {
        self.errors
    }

    pub(crate) fn into_parts(self) -> (Vec<Finding>, Vec<String>) {
        (self.errors, self.warnings)
    }
}

/// Strictly decodes a YAML document into `T`; a decode error becomes a finding with serde's message, which
/// names the key path, line and column. An empty document (nothing but comments) is a finding unless
/// `allow_empty`, in which case it decodes as `T::default()`.
pub(crate) fn decode_strict<T: serde::de::DeserializeOwned + Default>(
    file: &str,
    text: &str,
    allow_empty: bool,
) -> Result<T, ValidationError> {
    let fail = |message: String| {
        let mut f = Findings::new(file);
        f.file_error(message);
        ValidationError {
            findings: f.into_vec(),
        }
    };
    // Deep flow nesting makes the YAML scanner quadratic; refuse it before decoding (util::yaml).
    crate::util::yaml::check_flow_depth(text.as_bytes())
        .map_err(|e| fail(format!("not valid YAML: {e}")))?;
    match serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text) {
        Ok(serde_yaml_ng::Value::Null) if allow_empty => return Ok(T::default()),
        Ok(serde_yaml_ng::Value::Null) => return Err(fail("the file is empty".into())),
        Ok(_) => {}
        Err(e) => return Err(fail(format!("not valid YAML: {e}"))),
    }
    serde_yaml_ng::from_str::<T>(text).map_err(|e| fail(hide_values(&e.to_string())))
}

/// serde's messages quote the value they refused (`invalid type: string "http://u:pw@…", expected
/// struct Proxy`), and that value may be a secret pasted in the wrong place: the text of every quoted
/// string is dropped, keeping the field, the kind and the position.
pub(crate) fn hide_values(message: &str) -> String {
    const QUOTED: &str = "string \"";
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest.find(QUOTED) {
        out.push_str(&rest[..start]);
        out.push_str("string (value not shown)");
        let body = &rest[start + QUOTED.len()..];
        rest = match closing_quote(body) {
            Some(end) => &body[end + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// The index of the `"` that ends a Debug-escaped string body.
fn closing_quote(body: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i),
            _ => {}
        }
    }
    None
}

/// `"field[i]"`.
pub(crate) fn idx(field: &str, i: usize) -> String {
    format!("{field}[{i}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_anyhow_error_carrying_findings_becomes_findings_and_any_other_a_failure() {
        let v = ValidationError {
            findings: vec![Finding {
                file: "sites.yaml".into(),
                field: "sites[0].name".into(),
                message: "required".into(),
                line: Some(2),
            }],
        };
        let wrapped = anyhow::Error::from(v.clone()).context("reading the fleet");
        assert!(matches!(Invalid::from(wrapped), Invalid::Findings(f) if f == v));
        assert!(matches!(
            Invalid::from(anyhow::anyhow!("reading sites.yaml: permission denied")),
            Invalid::Failed(_)
        ));
        // Back to the command: it still finds the findings to print one per line.
        let back = Invalid::Findings(v.clone()).into_anyhow();
        assert_eq!(back.downcast_ref::<ValidationError>(), Some(&v));
    }
}
