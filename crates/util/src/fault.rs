//! Faults a test can inject into a running `ibi` where no real input can cause them, to prove the
//! code around them copes (a BMC job that panics must end its site, not hang the fleet). Compiled in
//! only with the cargo feature `fault-injection` (the test suite's build); without it every point is
//! an empty function and the product has no such switch.
//!
//! `IBI_FAULT_PANIC=POINT@SUBJECT[,…]` panics at the named point when the subject contains
//! SUBJECT; `IBI_FAULT_HANG=…` stops there instead, for [`HANG`] (a BMC that stops answering). The
//! BMC jobs' points are `bmc-boot`, `bmc-eject`, `bmc-boot-disk` and `bmc-check`, once the System is
//! found; their subject is the BMC's address.

/// The variable naming the points that panic.
#[cfg(feature = "fault-injection")]
pub(crate) const PANIC_VAR: &str = "IBI_FAULT_PANIC";
/// The variable naming the points that hang.
#[cfg(feature = "fault-injection")]
pub(crate) const HANG_VAR: &str = "IBI_FAULT_HANG";
/// How long a point hangs: longer than any test waits.
#[cfg(feature = "fault-injection")]
pub(crate) const HANG: std::time::Duration = std::time::Duration::from_secs(900);

/// Panics when [`PANIC_VAR`] names `point` for `subject`, hangs when [`HANG_VAR`] does (feature
/// `fault-injection` only).
#[cfg(feature = "fault-injection")]
pub fn point(point: &str, subject: &str) {
    if let Some(spec) = std::env::var(PANIC_VAR)
        .ok()
        .filter(|v| wants(v, point, subject))
    {
        panic!("injected fault {spec:?} at {point} for {subject}");
    }
    if std::env::var(HANG_VAR).is_ok_and(|v| wants(&v, point, subject)) {
        std::thread::sleep(HANG);
    }
}

/// Without the feature: nothing.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn point(_point: &str, _subject: &str) {}

/// Whether `spec` (the variable's value) names `point` for `subject`.
#[cfg(any(test, feature = "fault-injection"))]
fn wants(spec: &str, point: &str, subject: &str) -> bool {
    spec.split(',').any(|one| {
        one.split_once('@')
            .is_some_and(|(p, s)| p == point && !s.is_empty() && subject.contains(s))
    })
}

#[cfg(test)]
mod tests {
    use super::wants;

    #[test]
    fn a_point_fires_only_for_its_subject() {
        let spec = "bmc-boot@127.0.0.1:9001,other@x";
        assert!(wants(spec, "bmc-boot", "https://127.0.0.1:9001"));
        assert!(!wants(spec, "bmc-boot", "https://127.0.0.1:9002"));
        assert!(!wants(spec, "bmc-check", "https://127.0.0.1:9001"));
        assert!(!wants("bmc-boot@", "bmc-boot", "anything"));
        assert!(!wants("", "bmc-boot", "anything"));
    }
}
