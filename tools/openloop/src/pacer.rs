//! The pacer: one per thread, sleeping on a timerfd armed with absolute CLOCK_MONOTONIC deadlines
//! (tokio's own timer has 1 ms resolution, which would add up to 1 ms to every latency). On each wake it
//! releases every slot whose time has come, never one early, and goes back to sleep until the next.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use tokio::io::unix::AsyncFd;

use crate::clock::mono_ns;
use crate::schedule::{Schedule, Slot};

/// The pacer never sleeps longer than this, so it notices a stop request and interval boundaries.
pub const MAX_SLEEP_NS: u64 = 20_000_000;

pub struct TimerFd(RawFd);

impl TimerFd {
    pub fn new() -> io::Result<TimerFd> {
        // SAFETY: plain syscall; the fd is owned by the returned value.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(TimerFd(fd))
    }

    /// Arm for an absolute CLOCK_MONOTONIC time (a time already past fires at once).
    pub fn set_abs(&self, at_ns: u64) -> io::Result<()> {
        let at_ns = at_ns.max(1); // 0 would disarm
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: (at_ns / 1_000_000_000) as _, tv_nsec: (at_ns % 1_000_000_000) as _ },
        };
        // SAFETY: valid fd and itimerspec.
        let rc = unsafe { libc::timerfd_settime(self.0, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Consume the expirations (WouldBlock when the timer has not fired).
    pub fn read(&self) -> io::Result<u64> {
        let mut n: u64 = 0;
        // SAFETY: reading 8 bytes into a u64.
        let rc = unsafe { libc::read(self.0, &mut n as *mut u64 as *mut libc::c_void, 8) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n)
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl Drop for TimerFd {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.0) };
    }
}

/// A timerfd registered with the thread's tokio reactor, re-armed only when its deadline changes (each
/// arming is a syscall and, in a VM, a costly reprogramming of the hardware timer).
pub struct WakeTimer {
    fd: AsyncFd<TimerFd>,
    armed: Cell<Option<u64>>,
}

impl WakeTimer {
    pub fn new() -> io::Result<WakeTimer> {
        // SAFETY: the TimerFd owns its fd and closes it only when dropped, i.e. after the AsyncFd that
        // holds it has deregistered it.
        let fd = unsafe { AsyncFd::register_with_interest(TimerFd::new()?, tokio::io::Interest::READABLE)? };
        Ok(WakeTimer { fd, armed: Cell::new(None) })
    }

    /// Make the timer fire at CLOCK_MONOTONIC `at_ns` (at once if that is past).
    pub fn arm(&self, at_ns: u64) -> io::Result<()> {
        if self.armed.get() != Some(at_ns) {
            self.fd.get_ref().set_abs(at_ns)?;
            self.armed.set(Some(at_ns));
        }
        Ok(())
    }

    /// Wait until the timer fires (never before its deadline).
    pub async fn fired(&self) -> io::Result<()> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| fd.get_ref().read()) {
                Ok(Ok(_)) => {
                    // The count is consumed, so the fd is not readable until the next expiry: telling tokio
                    // saves the read that would fail with EAGAIN at the next wait.
                    guard.clear_ready();
                    self.armed.set(None);
                    return Ok(());
                }
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }

    /// Sleep until CLOCK_MONOTONIC `at_ns` (returns at or after it, never before).
    pub async fn until(&self, at_ns: u64) -> io::Result<()> {
        self.arm(at_ns)?;
        self.fired().await
    }
}

/// How a pacer run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacerEnd {
    /// Every slot of this thread was released.
    Finished,
    /// `tick` asked to stop at this time.
    Stopped { at_ns: u64 },
}

/// One thread's walk through the schedule, in batches. A batch is this thread's next slot and every
/// later one due within `window_ns` of it; nothing of it is released before the due time of its last
/// slot, and then all of it at once (so every slot is released at or after its own time, at most the
/// window late). `release_due` may be called from anywhere on the thread (the timer's wake-up, an answer
/// that woke the thread, the runtime about to sleep): whoever is awake first releases the batch, so the
/// timer fires only when nothing else woke the thread.
///
/// Why batches: in a VM every wake-up (timer interrupt, context switch) costs 15-20 µs of CPU, more than
/// the rest of a request; requests sent together also wake the server once and come back together.
pub struct Pacer {
    sched: Schedule,
    next: Cell<u64>,
    window_ns: u64,
    stopped: Cell<bool>,
    /// Due time of the last slot of the current batch: nothing is released before it.
    batch_end: Cell<u64>,
}

impl Pacer {
    /// `window_ns`: the batch span. Slots further apart than the window are released one by one, exactly
    /// on time; 0 = one release per slot always.
    pub fn new(sched: Schedule, thread: u64, window_ns: u64) -> Pacer {
        let p = Pacer { sched, next: Cell::new(thread), window_ns, stopped: Cell::new(false), batch_end: Cell::new(0) };
        p.batch_end.set(p.compute_wake_at().unwrap_or(u64::MAX));
        p
    }

    pub fn schedule(&self) -> &Schedule {
        &self.sched
    }

    /// Every slot released, or stopped.
    pub fn done(&self) -> bool {
        self.stopped.get() || self.next.get() >= self.sched.total
    }

    pub fn stop(&self) {
        self.stopped.set(true);
    }

    /// If the current batch is due at `now`, release (in order) every slot due at `now`; returns how many.
    pub fn release_due(&self, now: u64, mut release: impl FnMut(Slot)) -> u64 {
        if self.stopped.get() {
            return 0;
        }
        if now < self.batch_end.get() {
            return 0;
        }
        let mut i = self.next.get();
        let mut n = 0;
        while i < self.sched.total {
            let due = self.sched.intended(i);
            if due > now {
                break;
            }
            release(Slot { intended: due, released: now });
            i += self.sched.threads;
            n += 1;
        }
        self.next.set(i);
        if n > 0 {
            self.batch_end.set(self.compute_wake_at().unwrap_or(u64::MAX));
        }
        n
    }

    /// When the timer should fire next (None when done): the end of the current batch.
    pub fn wake_at(&self) -> Option<u64> {
        if self.done() {
            return None;
        }
        Some(self.batch_end.get())
    }

    fn compute_wake_at(&self) -> Option<u64> {
        if self.done() {
            return None;
        }
        let step = self.sched.threads;
        let mut j = self.next.get();
        let first = self.sched.intended(j);
        let limit = first + self.window_ns;
        while j + step < self.sched.total && self.sched.intended(j + step) <= limit {
            j += step;
        }
        Some(self.sched.intended(j))
    }
}

/// Drive `pacer` with a timer alone until it is done (the simplest driver; the worker threads add
/// releases from other wake-ups). `tick(now)` runs on every wake (at least every MAX_SLEEP_NS) and
/// returns true to stop early.
pub async fn run_pacer(pacer: &Pacer, release: impl Fn(Slot), mut tick: impl FnMut(u64) -> bool) -> io::Result<PacerEnd> {
    let sleep = WakeTimer::new()?;
    loop {
        let now = mono_ns();
        if tick(now) {
            pacer.stop();
            return Ok(PacerEnd::Stopped { at_ns: now });
        }
        pacer.release_due(now, &release);
        match pacer.wake_at() {
            None => return Ok(PacerEnd::Finished),
            Some(at) => sleep.until(at.min(now + MAX_SLEEP_NS)).await?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn precise_sleep_wakes_at_or_after_deadline() {
        rt().block_on(async {
            let s = WakeTimer::new().unwrap();
            let mut late = Vec::new();
            for k in 0..200u64 {
                let at = mono_ns() + 50_000 + (k % 7) * 13_000;
                s.until(at).await.unwrap();
                let now = mono_ns();
                assert!(now >= at, "woke {} ns early", at - now);
                late.push(now - at);
            }
            // a past deadline returns at once
            let t0 = mono_ns();
            s.until(t0 - 1_000_000).await.unwrap();
            assert!(mono_ns() - t0 < 5_000_000);
            late.sort();
            eprintln!("timerfd wake lateness: median {} ns, max {} ns", late[late.len() / 2], late[late.len() - 1]);
        });
    }

    #[test]
    fn pacer_releases_every_slot_in_order_never_early() {
        rt().block_on(async {
            let start = mono_ns() + 5_000_000;
            let threads = 2;
            let sched = Schedule::new(start, 20_000.0, 200_000_000, threads);
            let mut got: Vec<Vec<Slot>> = vec![Vec::new(); threads as usize];
            for k in 0..threads {
                let mine = std::cell::RefCell::new(Vec::new());
                let pacer = Pacer::new(sched, k, 100_000);
                let end = run_pacer(&pacer, |s| mine.borrow_mut().push(s), |_| false).await.unwrap();
                assert_eq!(end, PacerEnd::Finished);
                assert!(pacer.done());
                got[k as usize] = mine.into_inner();
            }
            for (k, mine) in got.iter().enumerate() {
                let expected: Vec<u64> = sched.thread_slots(k as u64).map(|i| sched.intended(i)).collect();
                assert_eq!(mine.iter().map(|s| s.intended).collect::<Vec<_>>(), expected);
                for s in mine {
                    assert!(s.released >= s.intended, "released {} ns early", s.intended - s.released);
                }
            }
            // thread 1 ran after thread 0 finished, so its slots were all overdue: released in one burst,
            // still with their own intended times (latency is charged from those).
            assert_eq!(got[0].len() + got[1].len(), 4_000);
        });
    }

    #[test]
    fn window_batches_dense_slots_only() {
        // 10k/s on one thread, 100 us window: the timer is armed for the 2nd slot of each pair
        let p = Pacer::new(Schedule::new(0, 10_000.0, 1_000_000_000, 1), 0, 100_000);
        assert_eq!(p.wake_at(), Some(100_000));
        let mut got = Vec::new();
        // the first slot is due, but its batch is not: nothing yet
        assert_eq!(p.release_due(99_999, |s| got.push(s)), 0);
        assert_eq!(p.release_due(100_000, |s| got.push(s)), 2);
        assert_eq!(got, vec![Slot { intended: 0, released: 100_000 }, Slot { intended: 100_000, released: 100_000 }]);
        assert_eq!(p.wake_at(), Some(300_000));
        // a late wake releases everything due, whatever the batches
        assert_eq!(p.release_due(650_000, |_| {}), 5);
        assert_eq!(p.wake_at(), Some(800_000));
        // sparse slots (1k/s): exactly on time
        let p = Pacer::new(Schedule::new(0, 1_000.0, 1_000_000_000, 1), 0, 100_000);
        assert_eq!(p.wake_at(), Some(0));
        p.release_due(0, |_| {});
        assert_eq!(p.wake_at(), Some(1_000_000));
        // two threads at 40k/s: thread 1 owns 25, 75, 125, ... us
        let p = Pacer::new(Schedule::new(0, 40_000.0, 1_000_000_000, 2), 1, 100_000);
        assert_eq!(p.wake_at(), Some(125_000));
        assert_eq!(p.release_due(124_999, |_| {}), 0);
        assert_eq!(p.release_due(125_000, |_| {}), 3);
        assert_eq!(p.wake_at(), Some(275_000));
        // no window: one wake per slot
        let p = Pacer::new(Schedule::new(0, 40_000.0, 1_000_000_000, 1), 0, 0);
        assert_eq!(p.wake_at(), Some(0));
        // never early, whatever the caller's clock says
        let p = Pacer::new(Schedule::new(1_000, 10.0, 1_000_000_000, 1), 0, 0);
        assert_eq!(p.release_due(999, |_| panic!("early")), 0);
        // the end
        let p = Pacer::new(Schedule::new(0, 10.0, 1_000_000_000, 1), 0, 1_000_000_000);
        assert_eq!(p.wake_at(), Some(900_000_000));
        assert_eq!(p.release_due(u64::MAX, |_| {}), 10);
        assert!(p.done());
        assert_eq!(p.wake_at(), None);
    }

    #[test]
    fn pacer_stops_when_tick_says_so() {
        rt().block_on(async {
            let start = mono_ns();
            let sched = Schedule::new(start, 1_000.0, 10_000_000_000, 1);
            let stop_at = start + 100_000_000;
            let n = Cell::new(0u64);
            let pacer = Pacer::new(sched, 0, 0);
            let end = run_pacer(&pacer, |_| n.set(n.get() + 1), |now| now >= stop_at).await.unwrap();
            let n = n.get();
            assert!(pacer.done());
            assert_eq!(pacer.release_due(u64::MAX, |_| panic!("released after stop")), 0);
            let PacerEnd::Stopped { at_ns } = end else { panic!("{end:?}") };
            assert!(at_ns >= stop_at);
            // every slot due before the stop was released, none due after it
            assert!(n >= 100 && n <= 1 + (at_ns - start) / 1_000_000, "released {n}, stopped {} ns in", at_ns - start);
        });
    }
}
