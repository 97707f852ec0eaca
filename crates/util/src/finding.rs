//! Validation findings: one problem in one field of one input file, and the error that carries every
//! finding of a pass, which each command prints one per line (the user fixes all of them at once).
//!
//! Findings are rendered `file: field: message` so a user can jump from the message to the YAML key; the
//! field path uses the YAML names (`compute[0].replicas`), not Rust names. A finding that knows the line
//! of its key (a template placeholder, an inventory entry) is rendered `file:LINE: field: message`, as
//! compilers do, so terminals and editors jump straight to it.

use std::fmt;

/// One problem found in an input file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Finding {
    /// The file, relative to the site directory (`install-config.yaml`, `extra-manifests/foo.yaml`).
    pub file: String,
    /// The YAML path of the field (`networking.machineNetwork[1].cidr`), or empty for the whole file.
    pub field: String,
    pub message: String,
    /// The 1-based line of the field in `file`, when known.
    pub line: Option<usize>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Every finding of a validation pass; callers branch on this type (e.g. to print them one per line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationError {
    pub findings: Vec<Finding>,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, finding) in self.findings.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{finding}")?;
        }
        Ok(())
    }
}
