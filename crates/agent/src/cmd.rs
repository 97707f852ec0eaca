//! The one way the host agent runs external commands (`losetup`, `mount`, `mkfs.xfs` …): an argv
//! built by a pure function, never a shell string; the argv logged at debug level; stdin closed;
//! stdout returned; on failure an error that names the command, its exit status and the tail of its
//! stderr, so the journal says why without a second run.

use std::ffi::{OsStr, OsString};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use tracing::debug;

/// Most lines of stderr an error message carries.
const STDERR_TAIL_LINES: usize = 20;
/// Most bytes of stderr an error message carries.
const STDERR_TAIL_BYTES: usize = 2048;

/// Builds an argv from a program name and its arguments.
pub(crate) fn argv<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Vec<OsString> {
    let mut v = Vec::with_capacity(args.len() + 1);
    v.push(OsString::from(program));
    v.extend(args.iter().map(|a| a.as_ref().to_os_string()));
    v
}

/// Runs `argv` (program first) and returns its stdout. Fails when the program cannot start or
/// exits non-zero, with the tail of its stderr in the message.
pub(crate) fn run(argv: &[OsString]) -> Result<String> {
    let (program, args) = argv.split_first().context("empty command line")?;
    let shown = display_argv(argv);
    debug!(target: "ibi::agent::cmd", argv = %shown, "running command");
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("starting `{shown}`"))?;
    if !out.status.success() {
        bail!(
            "`{shown}` failed ({}): {}",
            out.status,
            stderr_tail(&out.stderr)
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{shown}` printed non-UTF-8 output"))
}

/// Renders an argv for logs and errors: space-separated, arguments with spaces or quotes quoted.
pub(crate) fn display_argv(argv: &[OsString]) -> String {
    argv.iter()
        .map(|a| {
            let s = a.to_string_lossy();
            if s.is_empty() || s.contains([' ', '\'', '"', '\t', '\n']) {
                format!("{s:?}")
            } else {
                s.into_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The last lines of a command's stderr, bounded in lines and bytes, on one line.
fn stderr_tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return "no output on stderr".to_string();
    }
    let tail = lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("; ");
    if tail.len() <= STDERR_TAIL_BYTES {
        return tail;
    }
    let mut cut = tail.len() - STDERR_TAIL_BYTES;
    while !tail.is_char_boundary(cut) {
        cut += 1;
    }
    format!("…{}", &tail[cut..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_stdout() {
        let out = run(&argv("sh", &["-c", "echo hello"])).unwrap();
        assert_eq!(out, "hello\n");
    }

    #[test]
    fn failure_names_command_status_and_stderr_tail() {
        let err = run(&argv(
            "sh",
            &["-c", "echo first >&2; echo 'it broke' >&2; exit 3"],
        ))
        .unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "`sh -c \"echo first >&2; echo 'it broke' >&2; exit 3\"` failed (exit status: 3): \
             first; it broke"
        );
    }

    #[test]
    fn failure_without_stderr_says_so() {
        let err = run(&argv("false", &[] as &[&str])).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "`false` failed (exit status: 1): no output on stderr"
        );
    }

    #[test]
    fn missing_program_is_named() {
        let err = run(&argv("/nonexistent/ibi-no-such-tool", &["x"])).unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.starts_with("starting `/nonexistent/ibi-no-such-tool x`: "),
            "{text}"
        );
    }

    #[test]
    fn stderr_tail_is_bounded() {
        let many: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let tail = stderr_tail(many.as_bytes());
        assert!(tail.starts_with("line 80; "), "{tail}");
        assert!(tail.ends_with("line 99"));
        let long = "x".repeat(5000);
        assert_eq!(
            stderr_tail(long.as_bytes()).len(),
            STDERR_TAIL_BYTES + '…'.len_utf8()
        );
    }

    #[test]
    fn empty_argv_is_an_error() {
        assert_eq!(format!("{:#}", run(&[]).unwrap_err()), "empty command line");
    }
}
