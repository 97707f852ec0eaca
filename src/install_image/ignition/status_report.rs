//! What an installation ISO built with `statusURL` adds so the host reports to `ibi serve`
//! (contract: `crate::contract::host_report`).
//!
//! Both host agents get `/var/tmp/ibi-report.json` (0600: the server's URL, its CA and the ISO's report
//! token). `hostAgent: ibi` needs nothing else: `ibi agent install` reads that file and reports each step.
//! `hostAgent: lca` runs lca-cli, which reports nothing, so the ISO also gets [`REPORT_SCRIPT`] and three
//! static units from `units/`: one reports `running` once the network is up, one `done` after the
//! install unit succeeded (`Requires=` + `After=` it), and one `failed`, started by the install unit's
//! `OnFailure=` (a drop-in, so the installer's unit text is unchanged), with the unit's journal.
//!
//! With `shutdown: true`, lca-cli powers the host off from inside the install unit, and the success
//! report would never be sent; so ibi-configuration.json then says `shutdown: false`, and the power-off
//! runs after the success report instead (a drop-in of the `done` unit): the same end, in an order the
//! server hears about. `ibi agent install` reports before its own shutdown step and needs no such help.

use anyhow::{Context, Result};
use serde_json::json;

use crate::contract::host_report::{
    DEFAULT_ATTEMPTS, DEFAULT_DELAY_SECONDS, REPORT_CONFIG_PATH, ReportConfig,
};
use crate::ignition::types::{File, Unit};
use crate::util::secret::Secret;

/// Where the `hostAgent: lca` report script goes; 0555 like the installer's script.
pub const REPORT_SCRIPT_PATH: &str = "/usr/local/bin/ibi-report.sh";
/// Reports `running` once the live system has its network.
pub const REPORT_START_UNIT: &str = "ibi-report-start.service";
/// Reports `done` after the install unit succeeded.
pub const REPORT_DONE_UNIT: &str = "ibi-report-done.service";
/// Reports `failed` with the journal; started by the install unit's `OnFailure=`.
pub const REPORT_FAILED_UNIT: &str = "ibi-report-failed.service";
/// The texts of the three units, shared with the tests of `units_verify.rs` (one copy, in `units/`).
pub const REPORT_START_SERVICE: &str = include_str!("../../../units/ibi-report-start.service");
pub const REPORT_DONE_SERVICE: &str = include_str!("../../../units/ibi-report-done.service");
pub const REPORT_FAILED_SERVICE: &str = include_str!("../../../units/ibi-report-failed.service");
/// The drop-in of the install unit that starts [`REPORT_FAILED_UNIT`] when it fails.
pub const INSTALL_UNIT_REPORT_DROPIN: &str = "20-ibi-report.conf";
/// The drop-in of [`REPORT_DONE_UNIT`] that powers the host off after the report (`shutdown: true`).
pub const SHUTDOWN_DROPIN: &str = "20-ibi-shutdown.conf";
/// The report file's mode: it holds the token.
const REPORT_CONFIG_MODE: u32 = 0o600;
/// The script's mode: the installer's rule for `bin/`.
const REPORT_SCRIPT_MODE: u32 = 0o555;

/// `ibi-report.sh running|done|failed`: builds the report with `jq` (on the live ISO: lca-cli needs it)
/// and posts it with `curl`. Nothing secret reaches a command line, the environment or the journal:
/// the token goes to curl as a config line on its stdin, the body through a private temp file. Journal
/// lines lose every value of the pull secret's `auths` (each `auth`, its decoded `user:password` and the
/// password alone, `password`, `identitytoken`, `registrytoken`), the token, and the password of any
/// `scheme://user:password@` URL; then they are cut to 100 lines of 500 characters. The inputs can be
/// moved with `IBI_REPORT_CONFIG`, `PULL_SECRET_FILE`, `PRODUCT_UUID_FILE` and `HOSTNAME_FILE`, as the installer's
/// script takes `SEED_IMAGE` and friends.
pub const REPORT_SCRIPT: &str = r#"#!/bin/bash
# Written by ibi (statusURL, hostAgent: lca). Posts the state of install-rhcos-and-restore-seed.service
# to ibi serve: `running` once the live ISO has its network, then `done` or `failed` when the unit ends;
# `failed` carries the last lines of the unit's journal, secrets filtered out. Retries a bounded number
# of times while the server is unreachable (no answer, 408, 429, 5xx); any other refusal is final.
set -euo pipefail

state="${1:-}"
case "${state}" in
    running | done | failed) ;;
    *) echo "usage: $0 running|done|failed" >&2; exit 2 ;;
esac
config="${IBI_REPORT_CONFIG:-/var/tmp/ibi-report.json}"
pull_secret="${PULL_SECRET_FILE:-/var/tmp/pull-secret.json}"
uuid_file="${PRODUCT_UUID_FILE:-/sys/class/dmi/id/product_uuid}"
hostname_file="${HOSTNAME_FILE:-/proc/sys/kernel/hostname}"
unit=install-rhcos-and-restore-seed.service

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

error=""
: >"${work}/journal"
if [ "${state}" = failed ]; then
    # systemd (251 and later) tells an OnFailure= unit how the unit it watches ended.
    error="${unit} failed (result ${MONITOR_SERVICE_RESULT:-unknown}, ${MONITOR_EXIT_CODE:-exit} ${MONITOR_EXIT_STATUS:-unknown})"
    journalctl --boot --unit "${unit}" --lines 100 --output short-iso --no-pager >"${work}/journal" 2>&1 || true
fi
if jq -e . "${pull_secret}" >/dev/null 2>&1; then
    cp "${pull_secret}" "${work}/pull-secret.json"
else
    echo '{}' >"${work}/pull-secret.json"
fi
uuid="$(tr 'A-F' 'a-f' <"${uuid_file}" 2>/dev/null || true)"
boot_id="$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || true)"
booted="$(awk '/^btime / {print $2}' /proc/stat)"

jq --null-input --compact-output \
    --slurpfile cfg "${config}" --slurpfile ps "${work}/pull-secret.json" \
    --rawfile journal "${work}/journal" \
    --arg state "${state}" --arg error "${error}" --arg now "$(date +%s)" --arg booted "${booted}" \
    --arg hostname "$(cat "${hostname_file}")" --arg uuid "${uuid}" --arg boot_id "${boot_id}" \
    '
    def secrets:
        [$cfg[0].token,
         ($ps[0].auths // {} | .[] | objects
          | (.auth // empty | strings
             | ., (try @base64d catch empty | ., (split(":") | .[1:] | join(":")))),
            (.password, .identitytoken, .registrytoken | strings))]
        | map(select(type == "string" and length > 0)) | unique | sort_by(-length);
    def scrub:
        reduce secrets[] as $s (.; split($s) | join("<redacted>"))
        | gsub("://[^/@\\s:]+:[^/\\s]*@"; "://<redacted>@");
    def when(cond; obj): if cond then obj else {} end;
    {version: 1, agent: "lca",
     host: ({hostname: $hostname} + when($uuid != ""; {productUuid: $uuid})
            + when($boot_id != ""; {bootId: $boot_id})),
     status: ({step: "install-rhcos-and-restore-seed", state: $state,
               started: ($booted | tonumber), updated: ($now | tonumber),
               bytes_done: 0, bytes_total: 0, images: {pulled: 0, failed: 0, total: 0}}
              + when($error != ""; {error: ($error | scrub)})),
     finished: ($state != "running"),
     logs: ($journal | split("\n") | map(select(length > 0)) | .[-100:]
            | map(scrub | .[0:500]))}
    ' >"${work}/body"

endpoint="$(jq -r '.url | sub("/+$"; "") + "/reports"' "${config}")"
attempts="$(jq -r '.attempts' "${config}")"
delay="$(jq -r '.delaySeconds' "${config}")"
jq -r '.caPem // empty' "${config}" >"${work}/ca.pem"
ca=()
if [ -s "${work}/ca.pem" ]; then
    ca=(--cacert "${work}/ca.pem")
fi
for ((try = 1; try <= attempts; try++)); do
    # The token reaches curl as a config line on its stdin: never on a command line or in the environment.
    code="$(jq -r '"header = \"Authorization: Bearer \(.token)\""' "${config}" |
        curl --config - --silent --show-error --output /dev/null --write-out '%{http_code}' \
            --max-time 30 "${ca[@]}" --header 'Content-Type: application/json' \
            --data-binary "@${work}/body" "${endpoint}")" || true
    case "${code}" in
        2??) echo "reported ${state} to ${endpoint}"; exit 0 ;;
        "" | 000 | 408 | 429 | 5??) ;;
        *) echo "report refused by ${endpoint}: HTTP ${code}" >&2; exit 1 ;;
    esac
    if [ "${try}" -lt "${attempts}" ]; then
        echo "could not report to ${endpoint} (HTTP ${code:-000}), try ${try} of ${attempts}; again in ${delay} s" >&2
        sleep "${delay}"
    fi
done
echo "gave up reporting ${state} to ${endpoint} after ${attempts} tries" >&2
exit 1
"#;

/// What the installation ISO's config needs to report: from `statusURL`, `statusCA` and the token.
#[derive(Debug, Clone, Default)]
pub struct StatusReportInputs {
    pub url: String,
    pub token: Secret,
    pub ca_pem: Option<String>,
}

/// `/var/tmp/ibi-report.json`, for both host agents.
pub fn report_config_file(i: &StatusReportInputs) -> Result<File> {
    let config = ReportConfig {
        url: i.url.clone(),
        token: i.token.clone(),
        ca_pem: i.ca_pem.clone(),
        attempts: DEFAULT_ATTEMPTS,
        delay_seconds: DEFAULT_DELAY_SECONDS,
    };
    let mut json = serde_json::to_vec(&config).context("encoding the report settings")?;
    json.push(b'\n');
    Ok(File::from_bytes(
        REPORT_CONFIG_PATH,
        REPORT_CONFIG_MODE,
        &json,
    ))
}

/// The `hostAgent: lca` script.
pub fn report_script_file() -> File {
    File::from_bytes(
        REPORT_SCRIPT_PATH,
        REPORT_SCRIPT_MODE,
        REPORT_SCRIPT.as_bytes(),
    )
}

/// The three `hostAgent: lca` report units; `shutdown` adds the power-off after the success report.
pub fn report_units(shutdown: bool) -> Vec<Unit> {
    let unit = |name: &str, text: &str, enabled: Option<bool>| Unit {
        contents: Some(text.to_string()),
        enabled,
        name: name.to_string(),
        ..Default::default()
    };
    let mut done = unit(REPORT_DONE_UNIT, REPORT_DONE_SERVICE, Some(true));
    if shutdown {
        let text = "[Service]\n# shutdown: true, moved here from lca-cli so that the success report goes first.\n\
                    ExecStartPost=/usr/bin/systemctl --no-block poweroff\n";
        done.extra.insert(
            "dropins".into(),
            json!([{"name": SHUTDOWN_DROPIN, "contents": text}]),
        );
    }
    vec![
        unit(REPORT_START_UNIT, REPORT_START_SERVICE, Some(true)),
        done,
        // Not enabled: only the install unit's OnFailure= starts it.
        unit(REPORT_FAILED_UNIT, REPORT_FAILED_SERVICE, None),
    ]
}

/// Adds the `OnFailure=` drop-in to the install unit.
pub fn add_failure_dropin(install: &mut Unit) {
    let dropin = json!({
        "name": INSTALL_UNIT_REPORT_DROPIN,
        "contents": format!("[Unit]\nOnFailure={REPORT_FAILED_UNIT}\n"),
    });
    match install.extra.get_mut("dropins") {
        Some(serde_json::Value::Array(list)) => list.push(dropin),
        _ => {
            install
                .extra
                .insert("dropins".into(), serde_json::Value::Array(vec![dropin]));
        }
    }
}

#[cfg(test)]
mod tests;
