//! The `hostAgent: ibi` variant of the installation ISO's config: instead of copying `lca-cli` out of
//! the seed and running `lca-cli ibi`, the live ISO copies `/usr/local/bin/ibi` out of
//! `hostAgentImage` and runs `ibi agent install` on the same `/var/tmp/ibi-configuration.json`.
//!
//! Wiring: the unit is `units/ibi-agent-install.service`, embedded as is. Its first `ExecStartPre=`
//! runs [`FETCH_IBI_SCRIPT`], which does what the installer's script does for lca-cli (podman create
//! with the pull secret, retried every 10 s until the registry answers, podman cp, podman rm); then the
//! unit relabels the binary and runs it. The per-ISO values (the image, the proxy) travel in an
//! Ignition drop-in of that unit, so the unit file stays one static text that `systemd-analyze verify`
//! checks in `tests/tools/units_verify.rs`. Every other file and unit is the lca variant's, byte
//! for byte.

use anyhow::Result;
use serde_json::json;

use super::units::{check_unit_value, proxy_environment};
use crate::config::Proxy;
use crate::ignition::types::Unit;

/// The live-ISO unit that fetches and runs `ibi agent install`; always enabled in this variant.
pub const IBI_AGENT_UNIT: &str = "ibi-agent-install.service";
/// Its text, shared with the tests of `units_verify.rs` (one copy, in `units/`).
pub const IBI_AGENT_SERVICE: &str = include_str!("../../../units/ibi-agent-install.service");
/// The first `ExecStartPre=` of [`IBI_AGENT_SERVICE`]; mode 0555 (the installer's rule for `bin/`).
pub const FETCH_IBI_SCRIPT_PATH: &str = "/usr/local/bin/fetch-ibi.sh";
/// Where the fetch script reads the image (set by [`HOST_AGENT_DROPIN`]).
pub const HOST_AGENT_IMAGE_ENV: &str = "HOST_AGENT_IMAGE";
/// The drop-in of [`IBI_AGENT_UNIT`] carrying `HOST_AGENT_IMAGE` and the proxy environment.
pub const HOST_AGENT_DROPIN: &str = "10-ibi-host-agent.conf";

/// Copies `/usr/local/bin/ibi` out of the host-agent image. Same inputs and defaults as the lca-cli
/// script (`$1` or the environment, `PULL_SECRET_FILE`), same retry loop; the path inside the image is
/// `config::HOST_AGENT_BINARY_IN_IMAGE`. The command given to `podman create` is never run: it only
/// makes the create work for an image without an entrypoint (the `Containerfile`'s is `FROM scratch`).
pub const FETCH_IBI_SCRIPT: &str = r#"#!/bin/bash
# Written by ibi (hostAgent: ibi). Copies the ibi binary out of the host-agent image to
# /usr/local/bin/ibi; ibi-agent-install.service then runs `ibi agent install`.
set -e

image="${1:-${HOST_AGENT_IMAGE}}"
authfile="${PULL_SECRET_FILE:-/var/tmp/pull-secret.json}"
if [ -z "${image}" ]; then
    echo "no host-agent image: give it as the first argument or in HOST_AGENT_IMAGE" >&2
    exit 1
fi

# A container left by an earlier, interrupted start of the unit would make every create fail.
podman rm --force ibi-agent >/dev/null 2>&1 || true
# The network or the registry may not be ready yet: keep trying until the container exists.
while ! podman create --authfile "${authfile}" --name ibi-agent "${image}" /usr/local/bin/ibi; do
    echo "could not create a container from ${image}; retrying in 10 seconds" >&2
    sleep 10
done
podman cp ibi-agent:/usr/local/bin/ibi /usr/local/bin/ibi
podman rm ibi-agent
"#;

/// [`IBI_AGENT_UNIT`], enabled, with its drop-in for `image` and `proxy`.
pub fn ibi_agent_unit(image: &str, proxy: Option<&Proxy>) -> Result<Unit> {
    let mut unit = Unit {
        contents: Some(IBI_AGENT_SERVICE.to_string()),
        enabled: Some(true),
        name: IBI_AGENT_UNIT.to_string(),
        ..Default::default()
    };
    let dropin = json!([{"name": HOST_AGENT_DROPIN, "contents": host_agent_dropin(image, proxy)?}]);
    unit.extra.insert("dropins".into(), dropin);
    Ok(unit)
}

/// The text of [`HOST_AGENT_DROPIN`]: the image for the fetch script, and the installer's proxy lines,
/// which both podman and `ibi agent install` (seed pull, precache) read.
pub fn host_agent_dropin(image: &str, proxy: Option<&Proxy>) -> Result<String> {
    check_unit_value("hostAgentImage", image)?;
    Ok(format!(
        "[Service]\nEnvironment={HOST_AGENT_IMAGE_ENV}={image}\n{}",
        proxy_environment(proxy)?
    ))
}

#[cfg(test)]
mod tests;
