//! The one read-parse-validate path of every input file: a document is read (a regular file of at most
//! 16 MiB, UTF-8), decoded strictly, validated, and whatever is wrong becomes a finding naming the file,
//! so the user sees every problem of every file in one pass.

use std::path::Path;

use anyhow::Context;

use super::finding::Findings;
use crate::util::finding::{Finding, ValidationError};

/// Reads, decodes and validates one input file, adding its findings and warnings to `out`;
/// `None` when the file is missing (a finding, with `hint` on how to get one) or does not decode.
pub(super) fn load_input<T>(
    dir: &Path,
    name: &str,
    hint: &str,
    parse: fn(&str) -> Result<T, ValidationError>,
    validate: fn(&T) -> (Vec<Finding>, Vec<String>),
    out: (&mut Vec<Finding>, &mut Vec<String>),
) -> anyhow::Result<Option<T>> {
    let text = read_input(dir, name, hint, out.0)?;
    Ok(text.and_then(|text| check_input(name, &text, parse, validate, out)))
}

/// Decodes and validates one input file's text (`file`'s), adding its findings and warnings to
/// `out`; `None` when it does not decode. A value still the template's placeholder is a finding
/// naming its line, in place of the rules' findings about that field.
pub(super) fn check_input<T>(
    file: &str,
    text: &str,
    parse: fn(&str) -> Result<T, ValidationError>,
    validate: fn(&T) -> (Vec<Finding>, Vec<String>),
    out: (&mut Vec<Finding>, &mut Vec<String>),
) -> Option<T> {
    let (findings, warnings) = out;
    let config = collect(parse(text), findings);
    if let Some(c) = &config {
        let (mut f, w) = validate(c);
        super::placeholder::supersede(&mut f, super::placeholder::check(file, text));
        findings.extend(f);
        warnings.extend(w);
    }
    config
}

/// Reads `dir/name`; a missing file becomes a finding, any other I/O error an error naming the path.
fn read_input(
    dir: &Path,
    name: &str,
    hint: &str,
    findings: &mut Vec<Finding>,
) -> anyhow::Result<Option<String>> {
    let path = dir.join(name);
    match read_document(&path) {
        Ok(Some(text)) => Ok(Some(text)),
        Ok(None) => {
            let mut f = Findings::new(name);
            f.file_error(format!(
                "file not found: {} is required{hint}",
                path.display()
            ));
            findings.extend(f.into_vec());
            Ok(None)
        }
        Err(DocumentError::Unreadable(e)) => {
            Err(e).with_context(|| format!("reading {}", path.display()))
        }
        Err(problem) => {
            let mut f = Findings::new(name);
            f.file_error(problem.to_string());
            findings.extend(f.into_vec());
            Ok(None)
        }
    }
}

/// Why an input document cannot be used; all but `Unreadable` are findings about the file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DocumentError {
    #[error(transparent)]
    Refused(crate::util::fs::InputError),
    #[error("not valid UTF-8 text")]
    NotUtf8,
    #[error("cannot be read")]
    Unreadable(#[source] std::io::Error),
}

/// The byte-order mark some editors put before UTF-8 text.
const UTF8_BOM: char = '\u{feff}';

/// Reads an input document (YAML or JSON): `None` when missing; otherwise a regular file of at most
/// [`crate::util::fs::MAX_INPUT_BYTES`] and UTF-8.
pub(crate) fn read_document(path: &Path) -> Result<Option<String>, DocumentError> {
    use crate::util::fs::{InputError, MAX_INPUT_BYTES, read_input_file};
    let bytes = match read_input_file(path, MAX_INPUT_BYTES) {
        Ok(b) => b,
        Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => return Ok(None),
        Err(InputError::Io { source, .. }) => return Err(DocumentError::Unreadable(source)),
        Err(e) => return Err(DocumentError::Refused(e)),
    };
    // Flow nesting is bounded where the text is decoded (util::yaml, through decode_strict).
    let text = String::from_utf8(bytes).map_err(|_| DocumentError::NotUtf8)?;
    // Windows editors start UTF-8 files with a byte-order mark, which libyaml would take for content
    // before the first key ("more than one document").
    Ok(Some(match text.strip_prefix(UTF8_BOM) {
        Some(rest) => rest.to_string(),
        None => text,
    }))
}

/// [`read_document`] for a file that must exist: a missing, refused or undecodable file is a
/// finding about `shown` (how findings name the file); an I/O error names the path.
pub(crate) fn read_document_or_finding(path: &Path, shown: &str) -> anyhow::Result<String> {
    match read_document(path) {
        Ok(Some(text)) => Ok(text),
        Ok(None) => Err(file_finding(
            shown,
            format!("file not found: {}", path.display()),
        )),
        Err(e) => Err(document_error(path, shown, e)),
    }
}

/// A [`DocumentError`] as the caller reports it: a finding about `shown`, or, when the file could not
/// be read at all, an I/O error naming the path.
pub(crate) fn document_error(path: &Path, shown: &str, e: DocumentError) -> anyhow::Error {
    match e {
        DocumentError::Unreadable(io) => {
            anyhow::Error::new(io).context(format!("reading {}", path.display()))
        }
        e => file_finding(shown, e.to_string()),
    }
}

/// One finding about a whole file, as an error.
pub(crate) fn file_finding(shown: &str, message: String) -> anyhow::Error {
    let mut f = Findings::new(shown);
    f.file_error(message);
    ValidationError {
        findings: f.into_vec(),
    }
    .into()
}

pub(super) fn collect<T>(r: Result<T, ValidationError>, findings: &mut Vec<Finding>) -> Option<T> {
    r.map_err(|e| findings.extend(e.findings)).ok()
}
