//! `GET /site-configuration`: a one-shot host whose site's configuration was too large for its ISO's
//! Ignition embed area fetches the site's configuration ISO here at install time
//! (`contract::config_iso::SITE_FETCH_ENDPOINT`). Only `ibi deploy --phase oneshot`'s hosts may: the
//! `Authorization: Bearer` token must be one of the hosts' own report tokens, compared in constant
//! time, and it names the site whose ISO is answered; anything else is refused (401 without a
//! token, 403 with another) and logged with its reason, never with the token.

use std::path::PathBuf;

use hyper::StatusCode;
use hyper::header::HeaderMap;

use super::catalog::HostToken;
use super::report::bearer;
use crate::contract::config_iso::{ISO_FILE_NAME, SITE_FETCH_ENDPOINT};
use crate::util::token::token_matches;

/// The route's path.
pub fn path() -> String {
    format!("/{SITE_FETCH_ENDPOINT}")
}

/// The hosts that may fetch, each with its site's directory.
#[derive(Debug, Default)]
pub struct SiteFetches {
    hosts: Vec<(HostToken, PathBuf)>,
}

impl SiteFetches {
    pub fn new(hosts: Vec<(HostToken, PathBuf)>) -> SiteFetches {
        SiteFetches { hosts }
    }

    /// The site and configuration ISO the request's token names, or the status and reason of the
    /// refusal.
    pub fn choose(&self, headers: &HeaderMap) -> Result<(String, PathBuf), (StatusCode, String)> {
        let Some(given) = bearer(headers) else {
            return Err((
                StatusCode::UNAUTHORIZED,
                "no Authorization: Bearer header".into(),
            ));
        };
        // Every token is compared, so the time taken says nothing about which came close.
        let mut found = None;
        for (host, dir) in &self.hosts {
            if token_matches(given, host.token.expose_str()) && found.is_none() {
                found = Some((host.site.clone(), dir.join(ISO_FILE_NAME)));
            }
        }
        found.ok_or((
            StatusCode::FORBIDDEN,
            "not the report token of a one-shot host of this deploy".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::secret::Secret;
    use hyper::header::{self, HeaderValue};

    #[test]
    fn only_a_hosts_own_token_names_its_sites_iso() {
        let f = SiteFetches::new(vec![
            (
                HostToken {
                    site: "a".into(),
                    token: Secret::new("aa".repeat(16)),
                },
                PathBuf::from("/b/sites/a"),
            ),
            (
                HostToken {
                    site: "b".into(),
                    token: Secret::new("bb".repeat(16)),
                },
                PathBuf::from("/b/sites/b"),
            ),
        ]);
        let ask = |v: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(v) = v {
                h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            }
            f.choose(&h)
        };
        assert_eq!(
            ask(Some(&format!("Bearer {}", "bb".repeat(16)))).unwrap(),
            (
                "b".to_string(),
                PathBuf::from("/b/sites/b/imagebasedconfig.iso")
            )
        );
        assert_eq!(ask(None).unwrap_err().0, StatusCode::UNAUTHORIZED);
        assert_eq!(
            ask(Some(&format!("Bearer {}", "cc".repeat(16))))
                .unwrap_err()
                .0,
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            ask(Some(&"aa".repeat(16))).unwrap_err().0,
            StatusCode::UNAUTHORIZED,
            "not a Bearer header"
        );
    }
}
