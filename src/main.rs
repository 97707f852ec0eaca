//! The `ibi` binary: parse, set up logging, run, report. Everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match ibi::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return ibi::commands::report_usage(&e),
    };
    if let Err(e) = ibi::util::logging::init(&cli.log_level) {
        eprintln!("error: {e:#}");
        return ExitCode::from(1);
    }
    match ibi::commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            ibi::commands::report_error(&e);
            ExitCode::from(ibi::commands::exit_code(&e))
        }
    }
}
