//! Small network-syntax helpers: CIDRs, IP addresses, DNS-1123 names and proxy URLs.
//!
//! These mirror the Kubernetes and Go standard-library rules the installer applies, written in-house so the
//! config module needs no URL or IP-network crate.

use crate::image_ref::{is_registry_host, split_host_port};
use std::fmt;
use std::net::IpAddr;

/// A parsed `address/prefix`, keeping the address as written (host bits may be set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

/// Why a text is not `address/prefix`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CidrError {
    #[error("not in CIDR notation (address/prefix)")]
    NotCidr,
    #[error("{0:?} is not an IP address")]
    Address(String),
    #[error("invalid prefix length {prefix:?} (0-{max})")]
    Prefix { prefix: String, max: u8 },
}

/// Why a CIDR is no network.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NetworkError {
    #[error("invalid CIDR {text:?}: {why}")]
    Cidr { text: String, why: CidrError },
    #[error("invalid CIDR {0:?}: address must be specified")]
    Unspecified(String),
    #[error("invalid network address {text:?}: expected {network}")]
    HostBits { text: String, network: Cidr },
}

/// Why a proxy URL is refused; never repeats the URL, which may carry credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProxyUrlError {
    #[error("not a URL: expected scheme://host[:port]")]
    NoScheme,
    #[error("not a URL: invalid scheme")]
    Scheme,
    #[error("not a URL: invalid port")]
    Port,
    #[error("not a URL: missing host")]
    NoHost,
    #[error("not a URL: invalid host")]
    Host,
}

impl Cidr {
    /// Parses `addr/prefix`; the prefix must be decimal digits within the family's bit length.
    pub(crate) fn parse(s: &str) -> Result<Cidr, CidrError> {
        let (addr, prefix) = s.split_once('/').ok_or(CidrError::NotCidr)?;
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| CidrError::Address(addr.to_string()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix =
            (!prefix.is_empty() && prefix.len() <= 3 && prefix.bytes().all(|b| b.is_ascii_digit()))
                .then(|| prefix.parse::<u8>().ok())
                .flatten()
                .filter(|p| *p <= max)
                .ok_or_else(|| CidrError::Prefix {
                    prefix: prefix.to_string(),
                    max,
                })?;
        Ok(Cidr { addr, prefix })
    }

    /// The network address (host bits cleared).
    pub(crate) fn network(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V4((u32::from(a) & mask).into())
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(a) & mask).into())
            }
        }
    }

    /// True when the two networks share an address.
    pub(crate) fn overlaps(&self, other: &Cidr) -> bool {
        if self.addr.is_ipv4() != other.addr.is_ipv4() {
            return false;
        }
        let shorter = Cidr {
            addr: other.addr,
            prefix: self.prefix.min(other.prefix),
        };
        let mine = Cidr {
            addr: self.addr,
            prefix: shorter.prefix,
        };
        mine.network() == shorter.network()
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Validates a CIDR used as a network: parseable, address specified, no host bits set.
pub(crate) fn check_network_cidr(s: &str) -> Result<Cidr, NetworkError> {
    let cidr = Cidr::parse(s).map_err(|why| NetworkError::Cidr {
        text: s.to_string(),
        why,
    })?;
    if cidr.addr.is_unspecified() {
        return Err(NetworkError::Unspecified(s.to_string()));
    }
    let network = Cidr {
        addr: cidr.network(),
        prefix: cidr.prefix,
    };
    if network.addr != cidr.addr {
        return Err(NetworkError::HostBits {
            text: s.to_string(),
            network,
        });
    }
    Ok(cidr)
}

/// A DNS-1123 label: lower-case alphanumerics and `-`, starting and ending alphanumeric, at most 63.
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// A DNS-1123 subdomain: dot-separated DNS-1123 labels, at most 253 characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// A DNS-1123 subdomain, optionally with one trailing dot (a fully qualified name).
pub(crate) fn is_domain_trailing_dot_ok(s: &str) -> bool {
    is_dns1123_subdomain(s.strip_suffix('.').unwrap_or(s))
}

/// An IP address or a domain name (trailing dot allowed), as NTP servers are written.
pub(crate) fn is_ip_or_domain(s: &str) -> bool {
    s.parse::<IpAddr>().is_ok() || is_domain_trailing_dot_ok(s)
}

/// The parts of a proxy URL that validation needs.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ProxyUrl<'a> {
    pub scheme: &'a str,
    pub host: &'a str,
}

/// Parses `scheme://[userinfo@]host[:port][/path]`. Error messages never repeat the URL, which may carry
/// credentials.
pub(crate) fn parse_proxy_url(s: &str) -> Result<ProxyUrl<'_>, ProxyUrlError> {
    let (scheme, rest) = s.split_once("://").ok_or(ProxyUrlError::NoScheme)?;
    let scheme_ok = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
    if !scheme_ok {
        return Err(ProxyUrlError::Scheme);
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // The port's text is not quoted: with a missing '@' it is the password of `user:password`.
    let (host, _port) = split_host_port(hostport).map_err(|_| ProxyUrlError::Port)?;
    if host.is_empty() {
        return Err(ProxyUrlError::NoHost);
    }
    let ip_ok = host.parse::<std::net::Ipv4Addr>().is_ok();
    if !ip_ok && !is_registry_host(host) {
        return Err(ProxyUrlError::Host);
    }
    Ok(ProxyUrl { scheme, host })
}

/// A `noProxy` element: a domain (leading `.` allowed, trailing `.` allowed, no wildcard), an IP or a CIDR.
pub(crate) fn is_no_proxy_element(s: &str) -> bool {
    let domain = s.strip_prefix('.').unwrap_or(s);
    is_domain_trailing_dot_ok(domain) || s.parse::<IpAddr>().is_ok() || Cidr::parse(s).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_checks() {
        let cases = [
            ("10.0.0.0/16", Ok("10.0.0.0/16")),
            ("2001:DB8::/32", Ok("2001:db8::/32")),
            (
                "0.0.0.0/0",
                Err("invalid CIDR \"0.0.0.0/0\": address must be specified"),
            ),
            (
                "10.0.0.1/16",
                Err("invalid network address \"10.0.0.1/16\": expected 10.0.0.0/16"),
            ),
            (
                "10.0.0.0/33",
                Err("invalid CIDR \"10.0.0.0/33\": invalid prefix length \"33\" (0-32)"),
            ),
            (
                "10.0.0.0",
                Err("invalid CIDR \"10.0.0.0\": not in CIDR notation (address/prefix)"),
            ),
            (
                "foo/8",
                Err("invalid CIDR \"foo/8\": \"foo\" is not an IP address"),
            ),
            (
                "0.0.0.0/8",
                Err("invalid CIDR \"0.0.0.0/8\": address must be specified"),
            ),
            (
                "10.0.0.0/+8",
                Err("invalid CIDR \"10.0.0.0/+8\": invalid prefix length \"+8\" (0-32)"),
            ),
        ];
        for (input, want) in cases {
            let got = check_network_cidr(input)
                .map(|c| c.to_string())
                .map_err(|e| e.to_string());
            assert_eq!(got.as_deref().map_err(String::as_str), want, "{input}");
        }
    }

    #[test]
    fn cidr_overlap() {
        let c = |s| Cidr::parse(s).unwrap();
        assert!(c("10.0.0.0/16").overlaps(&c("10.0.5.0/24")));
        assert!(c("10.0.5.0/24").overlaps(&c("10.0.0.0/8")));
        assert!(!c("10.0.0.0/16").overlaps(&c("10.1.0.0/16")));
        assert!(!c("10.0.0.0/16").overlaps(&c("fd00::/8")));
    }

    #[test]
    fn dns_names() {
        for ok in ["a", "a-b", "0a", "x.example.com", "a.b.c."] {
            assert!(is_domain_trailing_dot_ok(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a..b",
            "a_b",
            ".a",
            "*.a.com",
            &"a".repeat(64),
        ] {
            assert!(!is_domain_trailing_dot_ok(bad), "{bad}");
        }
        assert!(is_dns1123_label(&"a".repeat(63)));
        assert!(!is_dns1123_label("a.b"));
    }

    #[test]
    fn proxy_urls() {
        let ok = |s| {
            parse_proxy_url(s)
                .map(|u| (u.scheme, u.host))
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            ok("http://proxy.example.com:3128"),
            Ok(("http", "proxy.example.com"))
        );
        assert_eq!(
            ok("https://user:pw@10.0.0.1:8080/x"),
            Ok(("https", "10.0.0.1"))
        );
        assert_eq!(ok("http://[fd00::1]:3128"), Ok(("http", "[fd00::1]")));
        assert_eq!(
            ok("localhost"),
            Err("not a URL: expected scheme://host[:port]".into())
        );
        assert_eq!(ok("http://:3128"), Err("not a URL: missing host".into()));
        assert_eq!(ok("http://a_b:3128"), Err("not a URL: invalid host".into()));
        assert_eq!(ok("http://a:99999"), Err("not a URL: invalid port".into()));
        // No '@': the "port" is the password, which is never quoted.
        assert_eq!(
            ok("http://user:s3cret"),
            Err("not a URL: invalid port".into())
        );
    }

    #[test]
    fn no_proxy_elements() {
        for ok in [
            ".example.com",
            "example.com.",
            "10.0.0.1",
            "10.0.0.0/8",
            "fd00::/8",
            "localhost",
        ] {
            assert!(is_no_proxy_element(ok), "{ok}");
        }
        for bad in ["*.example.com", "", "a b", "exa_mple.com"] {
            assert!(!is_no_proxy_element(bad), "{bad}");
        }
    }
}
