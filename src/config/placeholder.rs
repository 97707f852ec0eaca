//! The values the templates ship for the user to replace (`create config-template`,
//! `create image-config-template`), and the check that refuses them: an unedited template would
//! otherwise build a "valid" ISO whose host gets a placeholder name and a MAC that matches no NIC.
//!
//! Each value is a macro so the templates' text (`concat!`) and [`PLACEHOLDERS`] share one literal;
//! a value the list names is a finding wherever the file has it at that field, naming the line.

use super::image_based_config::IMAGE_BASED_CONFIG_FILE;
use crate::util::finding::Finding;
use crate::util::yaml_lines::YamlLines;

/// `installation::IMAGE_BASED_INSTALLATION_CONFIG_FILE`, spelt out: `installation` reads its input through
/// `input`, which applies this module, so importing it here would close a circle (a test in
/// `installation` keeps the two equal).
pub(crate) const INSTALLATION_FILE: &str = "image-based-installation-config.yaml";

/// `hostname` in the `create config-template` output.
macro_rules! hostname {
    () => {
        "change-to-hostname"
    };
}
/// Every `mac-address` in the templates' `networkConfig`: all zeros is no NIC's address.
macro_rules! mac_address {
    () => {
        "00:00:00:00:00:00"
    };
}
/// `pullSecret` in the `create image-config-template` output (the installer's text).
macro_rules! pull_secret {
    () => {
        "<your-pull-secret>"
    };
}
/// `seedImage` in the `create image-config-template` output (the installer's text): an example
/// name, not a published seed.
macro_rules! seed_image {
    () => {
        "quay.io/openshift-kni/seed-image:4.16.0"
    };
}
pub(crate) use {hostname, mac_address, pull_secret, seed_image};

/// One placeholder: in `file`, the value at `field` (`[*]`: any index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placeholder {
    pub file: &'static str,
    pub field: &'static str,
    pub value: &'static str,
}

const fn placeholder(file: &'static str, field: &'static str, value: &'static str) -> Placeholder {
    Placeholder { file, field, value }
}

/// Every value a template marks as one to replace.
pub(crate) const PLACEHOLDERS: &[Placeholder] = &[
    placeholder(IMAGE_BASED_CONFIG_FILE, "hostname", hostname!()),
    placeholder(
        IMAGE_BASED_CONFIG_FILE,
        "networkConfig.interfaces[*].mac-address",
        mac_address!(),
    ),
    placeholder(
        INSTALLATION_FILE,
        "networkConfig.interfaces[*].mac-address",
        mac_address!(),
    ),
    placeholder(INSTALLATION_FILE, "pullSecret", pull_secret!()),
    placeholder(INSTALLATION_FILE, "seedImage", seed_image!()),
];

/// The placeholders `text` (the contents of `file`) still holds, each naming its field and line.
pub(crate) fn check(file: &str, text: &str) -> Vec<Finding> {
    let wanted: Vec<&Placeholder> = PLACEHOLDERS.iter().filter(|p| p.file == file).collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    let lines = YamlLines::parse(text);
    let mut out = Vec::new();
    for p in wanted {
        for (field, node) in lines.matching(p.field) {
            if node.scalar.as_deref().map(str::trim) == Some(p.value) {
                out.push(Finding {
                    file: file.to_string(),
                    field: field.to_string(),
                    message: format!(
                        "still the template's placeholder {:?}: replace it with this site's value",
                        p.value
                    ),
                    line: Some(node.line),
                });
            }
        }
    }
    out
}

/// Keeps one finding per field a placeholder finding names: the other findings about that value
/// (a placeholder pull secret is not JSON either) would only repeat the point.
pub(crate) fn supersede(findings: &mut Vec<Finding>, placeholders: Vec<Finding>) {
    findings.retain(|f| {
        !placeholders
            .iter()
            .any(|p| p.file == f.file && p.field == f.field)
    });
    findings.extend(placeholders);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{IMAGE_BASED_CONFIG_TEMPLATE, IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE};

    #[test]
    fn the_config_template_is_refused_at_each_placeholder_with_its_line() {
        let found = check(IMAGE_BASED_CONFIG_FILE, IMAGE_BASED_CONFIG_TEMPLATE);
        let text: Vec<String> = found.iter().map(ToString::to_string).collect();
        let line_of = |needle: &str| {
            IMAGE_BASED_CONFIG_TEMPLATE
                .lines()
                .position(|l| l.trim_start().starts_with(needle))
                .map(|i| i + 1)
                .unwrap()
        };
        assert_eq!(
            text,
            [
                format!(
                    "image-based-config.yaml:{}: hostname: still the template's placeholder \"change-to-hostname\": replace it with this site's value",
                    line_of("hostname:")
                ),
                format!(
                    "image-based-config.yaml:{}: networkConfig.interfaces[0].mac-address: still the template's placeholder \"00:00:00:00:00:00\": replace it with this site's value",
                    line_of("mac-address:")
                ),
            ]
        );
    }

    #[test]
    fn every_placeholder_is_in_its_template() {
        for p in PLACEHOLDERS {
            let template = if p.file == IMAGE_BASED_CONFIG_FILE {
                IMAGE_BASED_CONFIG_TEMPLATE
            } else {
                IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE
            };
            assert!(template.contains(p.value), "{p:?}");
        }
        let found = check(INSTALLATION_FILE, IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE);
        let fields: Vec<&str> = found.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["pullSecret", "seedImage"]);
    }

    #[test]
    fn edited_values_pass_and_other_findings_of_the_field_give_way() {
        let edited = IMAGE_BASED_CONFIG_TEMPLATE
            .replace(hostname!(), "sno-a17")
            .replace(mac_address!(), "52:54:00:aa:17:01");
        assert_eq!(check(IMAGE_BASED_CONFIG_FILE, &edited), []);
        let p = |field: &str| Finding {
            file: "f".into(),
            field: field.into(),
            message: "m".into(),
            line: None,
        };
        let mut findings = vec![p("pullSecret"), p("other")];
        supersede(
            &mut findings,
            vec![Finding {
                line: Some(3),
                ..p("pullSecret")
            }],
        );
        assert_eq!(
            findings,
            [
                p("other"),
                Finding {
                    line: Some(3),
                    ..p("pullSecret")
                }
            ]
        );
    }
}
