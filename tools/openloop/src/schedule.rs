//! The one schedule of a run: slot i is due at start + i/rate, and with T threads thread k owns the
//! slots i ≡ k (mod T). All arithmetic is in integer nanoseconds from one rounding rule, so every thread
//! computes the same instants.

/// One request's place in the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// CLOCK_MONOTONIC ns at which the request is due.
    pub intended: u64,
    /// CLOCK_MONOTONIC ns at which the pacer released it (never before `intended`).
    pub released: u64,
}

impl Slot {
    /// Where the request's latency is measured from: its intended time, moved later only by the pacer's
    /// deliberate batching (at most `window_ns`, the generator's own choice, like wrk2's timer tick). Any
    /// lateness beyond that window, and all waiting for a free connection (a slow or stalled server), is
    /// charged to the request: the coordinated-omission correction.
    pub fn charged_from(&self, window_ns: u64) -> u64 {
        self.released.min(self.intended.saturating_add(window_ns)).max(self.intended)
    }
}

/// Offset of slot `i` from the start of the schedule, in ns: round(i * 1e9 / rate).
pub fn offset_ns(rate: f64, i: u64) -> u64 {
    ((i as f64) * 1e9 / rate).round() as u64
}

/// Number of slots due inside a window of `duration_ns`: the count of i >= 0 with offset(i) < duration.
pub fn slots_in_window(rate: f64, duration_ns: u64) -> u64 {
    if duration_ns == 0 || rate <= 0.0 {
        return 0;
    }
    let mut n = ((duration_ns as f64) * rate / 1e9).ceil() as u64;
    while n > 0 && offset_ns(rate, n - 1) >= duration_ns {
        n -= 1;
    }
    while offset_ns(rate, n) < duration_ns {
        n += 1;
    }
    n
}

#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub start_ns: u64,
    pub rate: f64,
    pub duration_ns: u64,
    /// Slots in the whole window, all threads together.
    pub total: u64,
    pub threads: u64,
}

impl Schedule {
    pub fn new(start_ns: u64, rate: f64, duration_ns: u64, threads: u64) -> Schedule {
        assert!(rate > 0.0 && threads > 0);
        Schedule { start_ns, rate, duration_ns, total: slots_in_window(rate, duration_ns), threads }
    }

    /// When slot `i` is due (CLOCK_MONOTONIC ns).
    pub fn intended(&self, i: u64) -> u64 {
        self.start_ns + offset_ns(self.rate, i)
    }

    /// The thread that owns slot `i`.
    pub fn owner(&self, i: u64) -> u64 {
        i % self.threads
    }

    /// The slots thread `k` releases, in order.
    pub fn thread_slots(&self, k: u64) -> impl Iterator<Item = u64> {
        (k..self.total).step_by(self.threads as usize)
    }

    /// How many slots thread `k` owns.
    pub fn thread_slot_count(&self, k: u64) -> u64 {
        if k >= self.total {
            0
        } else {
            (self.total - k).div_ceil(self.threads)
        }
    }

    pub fn end_ns(&self) -> u64 {
        self.start_ns + self.duration_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_batching_window_is_left_uncharged() {
        let slot = |intended, released| Slot { intended, released };
        assert_eq!(slot(1_000, 1_000).charged_from(300_000), 1_000); // released on time
        assert_eq!(slot(1_000, 201_000).charged_from(300_000), 201_000); // batched: its release
        assert_eq!(slot(1_000, 900_000).charged_from(300_000), 301_000); // later than the window: charged
        assert_eq!(slot(1_000, 900_000).charged_from(0), 1_000); // exact timing: all charged
    }

    #[test]
    fn slot_times_follow_rate() {
        let s = Schedule::new(1_000, 4.0, 1_000_000_000, 1);
        assert_eq!(s.total, 4);
        let times: Vec<u64> = s.thread_slots(0).map(|i| s.intended(i)).collect();
        assert_eq!(times, vec![1_000, 250_001_000, 500_001_000, 750_001_000]);
    }

    #[test]
    fn fractional_rates_round_to_nearest_ns() {
        // 3 req/s: 333_333_333.33.. ns apart
        assert_eq!(offset_ns(3.0, 1), 333_333_333);
        assert_eq!(offset_ns(3.0, 2), 666_666_667);
        assert_eq!(offset_ns(3.0, 3), 1_000_000_000);
        // no drift over a long run: slot i*rate lands on whole seconds
        assert_eq!(offset_ns(40_000.0, 40_000 * 3600), 3600 * 1_000_000_000);
        assert_eq!(offset_ns(0.5, 3), 6_000_000_000);
    }

    #[test]
    fn window_counts_slots_strictly_before_end() {
        assert_eq!(slots_in_window(10_000.0, 1_000_000_000), 10_000);
        assert_eq!(slots_in_window(10_000.0, 1_000_000_001), 10_001);
        assert_eq!(slots_in_window(3.0, 1_000_000_000), 3);
        assert_eq!(slots_in_window(3.0, 1_000_000_001), 4);
        assert_eq!(slots_in_window(2.5, 1_000_000_000), 3); // 0, .4, .8
        assert_eq!(slots_in_window(1.0, 0), 0);
        for (rate, d) in [(7.3, 2_000_000_000u64), (40_000.0, 12_345_678_901), (0.1, 30_000_000_000)] {
            let n = slots_in_window(rate, d);
            assert!(offset_ns(rate, n - 1) < d && offset_ns(rate, n) >= d, "rate {rate} d {d} n {n}");
        }
    }

    #[test]
    fn threads_interleave_into_one_schedule() {
        for threads in 1..=4u64 {
            let s = Schedule::new(5_000, 1234.5, 2_000_000_000, threads);
            let mut all: Vec<(u64, u64)> = Vec::new();
            for k in 0..threads {
                let mine: Vec<u64> = s.thread_slots(k).collect();
                assert_eq!(mine.len() as u64, s.thread_slot_count(k));
                assert!(mine.iter().all(|&i| s.owner(i) == k));
                assert!(mine.windows(2).all(|w| s.intended(w[0]) < s.intended(w[1])));
                all.extend(mine.iter().map(|&i| (i, s.intended(i))));
            }
            all.sort();
            assert_eq!(all.len() as u64, s.total);
            let single = Schedule::new(5_000, 1234.5, 2_000_000_000, 1);
            for (i, t) in all {
                assert_eq!(t, single.intended(i), "thread split changes no instant");
            }
        }
        // more threads than slots
        let s = Schedule::new(0, 1.0, 2_000_000_000, 4);
        assert_eq!((0..4).map(|k| s.thread_slot_count(k)).collect::<Vec<_>>(), vec![1, 1, 0, 0]);
    }
}
