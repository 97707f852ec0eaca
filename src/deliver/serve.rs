//! `ibi serve`: an HTTPS (or, when asked, plain HTTP) server for the images ibi built, each under
//! an unguessable URL, for BMCs to fetch as virtual media.
//!
//! hyper 1 (HTTP/1.1 only: BMCs fetch virtual media over HTTP/1.1) on a multi-threaded tokio
//! runtime, with TLS from tokio-openssl on the system OpenSSL. [`prepare`] binds, sets up TLS,
//! hashes the images and writes served.json, all before anything is served; [`Prepared::serve`]
//! then runs until SIGINT or SIGTERM and stops cleanly: no new connections, in-flight answers get
//! a short grace, then the process returns.

mod access_log;
mod body;
pub mod catalog;
pub mod dashboard;
mod handler;
mod limits;
pub mod report;
pub mod rules;
mod server;
mod site_fetch;
mod source;
pub mod tls;

pub use server::{
    DashboardOptions, LOCK_FILE, PER_ADDRESS_DEFAULT, Prepared, Running, Selection, ServeOptions,
    TlsChoice, prepare, public_base,
};
pub use source::Source;
