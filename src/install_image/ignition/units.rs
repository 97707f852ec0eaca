//! What the units of both variants share: the installer's proxy `Environment=` lines, the guard that
//! keeps a value from ending its line and injecting directives, and the live system's static network
//! (its file and unit, which a one-shot ISO fills with its site's network).

use anyhow::{Result, bail};

use crate::config::Proxy;

/// Applied with `nmstatectl apply` by [`NETWORK_CONFIG_UNIT`].
pub const NETWORK_CONFIG_PATH: &str = "/var/tmp/network-config.yaml";
/// Applies the static network before the install unit; enabled only with a `networkConfig`.
pub const NETWORK_CONFIG_UNIT: &str = "network-config.service";
/// The installer's mode for every template file outside `bin/` (pull secret, configs; read by root
/// only); also the trust bundle's mode.
pub const PRIVATE_MODE: u32 = 0o600;

/// The installer's proxy lines: `Environment=` upper- and lower-case, quoted, for each value set.
pub fn proxy_environment(proxy: Option<&Proxy>) -> Result<String> {
    let mut s = String::new();
    let Some(p) = proxy else { return Ok(s) };
    for (upper, lower, value) in [
        ("HTTP_PROXY", "http_proxy", &p.http_proxy),
        ("HTTPS_PROXY", "https_proxy", &p.https_proxy),
        ("NO_PROXY", "no_proxy", &p.no_proxy),
    ] {
        if !value.is_empty() {
            check_unit_value(upper, value)?;
            let v = quote_unit_value(value);
            s.push_str(&format!(
                "Environment={upper}=\"{v}\"\nEnvironment={lower}=\"{v}\"\n"
            ));
        }
    }
    Ok(s)
}

/// A value with a control character would end the `Environment=` line and inject unit directives.
pub fn check_unit_value(name: &str, value: &str) -> Result<()> {
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        bail!(
            "{name} {value:?} contains the control character {c:?}, which cannot go into a systemd unit"
        );
    }
    Ok(())
}

/// Escapes for a double-quoted `Environment=` value. The installer writes the value raw; we escape `\`
/// and `"` (C-unescaped by systemd inside quotes) and `%` (a specifier): a percent-encoded proxy password
/// such as `p%40ss` otherwise makes systemd reject the line. Plain URLs come out unchanged.
fn quote_unit_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%")
}
