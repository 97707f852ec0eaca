//! Who may hold a connection: at most so many open connections per client address, and a record
//! of the connections the server dropped (over that limit, or idle: nothing sent within the
//! first-byte timeout), summed up in one log line per period instead of one line each, so a
//! client opening hundreds of sockets can neither starve the others nor flood the log.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::access_log::AccessLog;
use super::body::utc_timestamp;

/// Addresses the drop record keeps apart within one period; the rest are summed as "others", so a
/// flood from many addresses costs bounded memory.
const TRACKED_ADDRESSES: usize = 1024;
/// Addresses named in one log line, the busiest first.
const NAMED_ADDRESSES: usize = 3;

/// Why a connection was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// It sent nothing within the first-byte timeout.
    Idle,
    /// Its address already held the most connections one address may.
    OverLimit,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Count {
    idle: u64,
    over: u64,
}

impl Count {
    fn add(&mut self, why: Dropped) {
        match why {
            Dropped::Idle => self.idle += 1,
            Dropped::OverLimit => self.over += 1,
        }
    }

    fn total(&self) -> u64 {
        self.idle + self.over
    }
}

#[derive(Debug)]
struct Drops {
    since: Instant,
    by_address: HashMap<IpAddr, Count>,
    /// Drops from addresses beyond [`TRACKED_ADDRESSES`], summed.
    others: Count,
}

/// The connection limits of one server and its record of dropped connections.
#[derive(Debug)]
pub struct Limits {
    per_address: usize,
    first_byte: Duration,
    open: Mutex<HashMap<IpAddr, usize>>,
    drops: Mutex<Drops>,
    log: Arc<AccessLog>,
}

/// One admitted connection; its address's count goes down when it is dropped.
#[derive(Debug)]
pub struct Slot {
    limits: Arc<Limits>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = lock(&self.limits.open);
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Limits {
    pub fn new(per_address: usize, first_byte: Duration, log: Arc<AccessLog>) -> Limits {
        Limits {
            per_address,
            first_byte,
            open: Mutex::new(HashMap::new()),
            drops: Mutex::new(Drops {
                since: Instant::now(),
                by_address: HashMap::new(),
                others: Count::default(),
            }),
            log,
        }
    }

    /// A slot for a connection from `ip`, or `None` (and the drop recorded) when that address
    /// already holds its share.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        // One client, however it reaches us (an IPv4 peer on a dual-stack socket is ::ffff:a.b.c.d).
        let ip = ip.to_canonical();
        {
            let mut open = lock(&self.open);
            let n = open.entry(ip).or_insert(0);
            if *n < self.per_address {
                *n += 1;
                return Some(Slot {
                    limits: self.clone(),
                    ip,
                });
            }
        }
        self.dropped(ip, Dropped::OverLimit);
        None
    }

    pub fn dropped(&self, ip: IpAddr, why: Dropped) {
        let ip = ip.to_canonical();
        let mut d = lock(&self.drops);
        if let Some(c) = d.by_address.get_mut(&ip) {
            c.add(why);
        } else if d.by_address.len() < TRACKED_ADDRESSES {
            let mut c = Count::default();
            c.add(why);
            d.by_address.insert(ip, c);
        } else {
            d.others.add(why);
        }
    }

    /// Writes the period's line, if anything was dropped in it, and starts a new period.
    pub fn report(&self) {
        let now = Instant::now();
        let line = {
            let mut d = lock(&self.drops);
            let line = summary(&d, now.duration_since(d.since), self);
            d.by_address.clear();
            d.others = Count::default();
            d.since = now;
            line
        };
        if let Some(line) = line {
            self.log
                .line(&format!("{} {line}", utc_timestamp(SystemTime::now())));
        }
    }
}

/// `dropped 300 connections from 127.0.0.1 in the last 10 s: 32 idle (sent nothing within 5 s),
/// 268 over the limit of 32 per address`; from several addresses, the busiest first with their
/// counts and the reasons explained once at the end.
fn summary(d: &Drops, period: Duration, limits: &Limits) -> Option<String> {
    let total = d.by_address.values().map(Count::total).sum::<u64>() + d.others.total();
    if total == 0 {
        return None;
    }
    let mut busiest: Vec<_> = d.by_address.iter().collect();
    busiest.sort_by(|a, b| b.1.total().cmp(&a.1.total()).then(a.0.cmp(b.0)));
    let secs = period.as_secs_f64().round().max(1.0) as u64;
    let noun = if total == 1 {
        "connection"
    } else {
        "connections"
    };
    let idle_why = format!("sent nothing within {} s", limits.first_byte.as_secs());
    let untracked = d.others.total() > 0;
    if let ([(ip, c)], false) = (busiest.as_slice(), untracked) {
        let mut parts = Vec::new();
        if c.idle > 0 {
            parts.push(format!("{} idle ({idle_why})", c.idle));
        }
        if c.over > 0 {
            parts.push(format!(
                "{} over the limit of {} per address",
                c.over, limits.per_address
            ));
        }
        return Some(format!(
            "dropped {total} {noun} from {ip} in the last {secs} s: {}",
            parts.join(", ")
        ));
    }
    let counts = |c: &Count| {
        let mut parts = Vec::new();
        if c.idle > 0 {
            parts.push(format!("{} idle", c.idle));
        }
        if c.over > 0 {
            parts.push(format!("{} over the limit", c.over));
        }
        parts.join(", ")
    };
    let mut line = format!(
        "dropped {total} {noun} from {}{} addresses in the last {secs} s: ",
        if untracked { "more than " } else { "" },
        busiest.len()
    );
    let named: Vec<String> = busiest
        .iter()
        .take(NAMED_ADDRESSES)
        .map(|(ip, c)| format!("{ip} ({})", counts(c)))
        .collect();
    line.push_str(&named.join(", "));
    let mut rest = d.others;
    let mut rest_addresses = 0;
    for (_, c) in busiest.iter().skip(NAMED_ADDRESSES) {
        rest.idle += c.idle;
        rest.over += c.over;
        rest_addresses += 1;
    }
    if untracked {
        let _ = write!(line, ", other addresses ({})", counts(&rest));
    } else if rest_addresses > 0 {
        let _ = write!(
            line,
            ", {rest_addresses} other address{} ({})",
            if rest_addresses == 1 { "" } else { "es" },
            counts(&rest)
        );
    }
    let mut why = Vec::new();
    if busiest.iter().any(|(_, c)| c.idle > 0) || d.others.idle > 0 {
        why.push(format!("idle: {idle_why}"));
    }
    if busiest.iter().any(|(_, c)| c.over > 0) || d.others.over > 0 {
        why.push(format!(
            "over the limit: more than {} open from one address",
            limits.per_address
        ));
    }
    let _ = write!(line, "; {}", why.join("; "));
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_address: usize) -> (Arc<Limits>, tempfile::TempDir) {
        let d = tempfile::tempdir().unwrap();
        let log = AccessLog::append_to(&d.path().join("log")).unwrap();
        (
            Arc::new(Limits::new(
                per_address,
                Duration::from_secs(5),
                Arc::new(log),
            )),
            d,
        )
    }

    fn log_text(d: &tempfile::TempDir) -> String {
        std::fs::read_to_string(d.path().join("log")).unwrap_or_default()
    }

    #[test]
    fn an_address_holds_at_most_its_share_and_gets_it_back_as_connections_end() {
        let (l, _d) = limits(2);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let first = l.admit(a).unwrap();
        let _second = l.admit(mapped).unwrap();
        assert!(l.admit(a).is_none(), "a third from one address");
        let _other = l.admit(b).expect("another address is not held back");
        drop(first);
        assert!(l.admit(a).is_some(), "a slot freed is a slot again");
        let d = lock(&l.drops);
        assert_eq!(d.by_address[&a], Count { idle: 0, over: 1 });
    }

    #[test]
    fn drops_are_summed_in_one_line_per_period_and_a_quiet_period_says_nothing() {
        let (l, d) = limits(32);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..268 {
            l.dropped(a, Dropped::OverLimit);
        }
        for _ in 0..32 {
            l.dropped(a, Dropped::Idle);
        }
        l.report();
        l.report();
        let text = log_text(&d);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        let (_, rest) = lines[0].split_once(' ').unwrap();
        assert_eq!(
            rest,
            "dropped 300 connections from 127.0.0.1 in the last 1 s: 32 idle (sent nothing within 5 s), 268 over the limit of 32 per address"
        );
    }

    #[test]
    fn many_addresses_name_the_busiest_and_sum_the_rest() {
        let (l, d) = limits(32);
        for i in 1..=5u8 {
            let ip = IpAddr::from([10, 0, 0, i]);
            for _ in 0..i {
                l.dropped(ip, Dropped::Idle);
            }
        }
        l.dropped(IpAddr::from([10, 0, 0, 9]), Dropped::OverLimit);
        l.report();
        let text = log_text(&d);
        let (_, rest) = text.trim_end().split_once(' ').unwrap();
        assert_eq!(
            rest,
            "dropped 16 connections from 6 addresses in the last 1 s: 10.0.0.5 (5 idle), \
             10.0.0.4 (4 idle), 10.0.0.3 (3 idle), 3 other addresses (3 idle, 1 over the limit); \
             idle: sent nothing within 5 s; over the limit: more than 32 open from one address"
        );
    }

    #[test]
    fn the_record_is_bounded_whatever_the_number_of_addresses() {
        let (l, _d) = limits(32);
        for i in 0..(TRACKED_ADDRESSES as u32 + 500) {
            l.dropped(IpAddr::from(i.to_be_bytes()), Dropped::Idle);
        }
        let d = lock(&l.drops);
        assert_eq!(d.by_address.len(), TRACKED_ADDRESSES);
        assert_eq!(d.others, Count { idle: 500, over: 0 });
        let line = summary(&d, Duration::from_secs(10), &l).unwrap();
        assert!(
            line.starts_with(
                "dropped 1524 connections from more than 1024 addresses in the last 10 s: "
            ),
            "{line}"
        );
        assert!(
            line.ends_with(", other addresses (1521 idle); idle: sent nothing within 5 s"),
            "{line}"
        );
    }
}
