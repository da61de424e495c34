//! CLOCK_MONOTONIC in nanoseconds: the one clock for the schedule, the pacer's timerfd and every timestamp.

/// Now on CLOCK_MONOTONIC, in nanoseconds (a vDSO call, no syscall).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The tokio instant for a CLOCK_MONOTONIC time (tokio's Instant is CLOCK_MONOTONIC too, but opaque).
pub fn tokio_instant(at_ns: u64) -> tokio::time::Instant {
    let now_ns = mono_ns();
    let now = tokio::time::Instant::now();
    if at_ns >= now_ns {
        now + std::time::Duration::from_nanos(at_ns - now_ns)
    } else {
        now.checked_sub(std::time::Duration::from_nanos(now_ns - at_ns)).unwrap_or(now)
    }
}

/// Nanoseconds to whole microseconds, rounded to nearest.
pub fn ns_to_us(ns: u64) -> u64 {
    (ns + 500) / 1000
}
