//! The one schedule of a run: slot i is due at start + i/rate (or, with Poisson arrivals, at the i-th
//! arrival of a Poisson process of that mean rate drawn from the run's seed), and with T threads thread k
//! owns the slots i ≡ k (mod T). All arithmetic is in integer nanoseconds from one rounding rule, so every
//! thread computes the same instants.

/// How the slots are spaced in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrivals {
    /// Evenly: slot i at i/rate (what wrk2 and most open-model generators send).
    Even,
    /// A Poisson process of the same mean rate: exponential gaps, the arrivals of many independent users.
    Poisson,
}

impl Arrivals {
    pub fn parse(name: &str) -> Option<Arrivals> {
        match name {
            "even" => Some(Arrivals::Even),
            "poisson" => Some(Arrivals::Poisson),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Arrivals::Even => "even",
            Arrivals::Poisson => "poisson",
        }
    }
}

/// The offsets (ns from the start, non-decreasing, each < `duration_ns`) of a Poisson process of `rate`
/// per second, from `seed`: the same seed gives every thread the same instants.
pub fn poisson_offsets(rate: f64, duration_ns: u64, seed: u64) -> Vec<u64> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mean_gap_ns = 1e9 / rate;
    let mut out = Vec::with_capacity(((duration_ns as f64) * rate / 1e9 * 1.05) as usize + 16);
    let mut t = 0.0f64;
    loop {
        t += -(1.0 - rng.f64()).ln() * mean_gap_ns; // 1 - u lies in (0, 1]: ln is finite
        let at = t.round() as u64;
        if at >= duration_ns {
            return out;
        }
        out.push(at);
    }
}

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
    /// Poisson arrivals: each slot's offset, drawn once per schedule (None: evenly spaced). Leaked, so that a
    /// schedule stays Copy: a process builds a handful of schedules and exits.
    pub offsets: Option<&'static [u64]>,
}

impl Schedule {
    pub fn new(start_ns: u64, rate: f64, duration_ns: u64, threads: u64) -> Schedule {
        assert!(rate > 0.0 && threads > 0);
        Schedule { start_ns, rate, duration_ns, total: slots_in_window(rate, duration_ns), threads, offsets: None }
    }

    /// The schedule with `arrivals` spacing; Poisson's instants come from `seed`.
    pub fn with_arrivals(start_ns: u64, rate: f64, duration_ns: u64, threads: u64, arrivals: Arrivals,
                         seed: u64) -> Schedule {
        let even = Schedule::new(start_ns, rate, duration_ns, threads);
        match arrivals {
            Arrivals::Even => even,
            Arrivals::Poisson => {
                let offsets: &'static [u64] = Box::leak(poisson_offsets(rate, duration_ns, seed).into_boxed_slice());
                Schedule { total: offsets.len() as u64, offsets: Some(offsets), ..even }
            }
        }
    }

    /// When slot `i` is due (CLOCK_MONOTONIC ns).
    pub fn intended(&self, i: u64) -> u64 {
        self.start_ns + self.offsets.map_or_else(|| offset_ns(self.rate, i), |o| o[i as usize])
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
    fn poisson_arrivals_keep_the_mean_rate_and_the_seed() {
        let s = Schedule::with_arrivals(1_000, 5_000.0, 20_000_000_000, 2, Arrivals::Poisson, 7);
        // 100,000 expected; a Poisson count's standard deviation is sqrt(100,000) ~ 316
        assert!((s.total as i64 - 100_000).abs() < 2_000, "{}", s.total);
        let again = Schedule::with_arrivals(1_000, 5_000.0, 20_000_000_000, 2, Arrivals::Poisson, 7);
        assert_eq!(s.offsets, again.offsets, "one seed, one set of instants (every thread builds its own)");
        let gaps: Vec<u64> = (1..s.total).map(|i| s.intended(i) - s.intended(i - 1)).collect();
        assert!(s.intended(s.total - 1) < s.end_ns());
        // exponential gaps: as many below the mean's ln 2 (the median) as above
        let below = gaps.iter().filter(|&&g| (g as f64) < 200_000.0 * std::f64::consts::LN_2).count();
        assert!((below as f64 / gaps.len() as f64 - 0.5).abs() < 0.01, "{below} of {}", gaps.len());
        let other = Schedule::with_arrivals(1_000, 5_000.0, 20_000_000_000, 2, Arrivals::Poisson, 8);
        assert_ne!(s.offsets, other.offsets);
        assert_eq!(Schedule::with_arrivals(0, 4.0, 1_000_000_000, 1, Arrivals::Even, 7).total, 4);
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
