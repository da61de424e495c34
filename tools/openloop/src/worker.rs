//! One OS thread of the generator: a tokio current_thread runtime running the thread's pacer and its
//! share of the connections. Nothing here crosses threads except the start time, a few atomics
//! (in-flight and queue high-water marks, the stop flags) and the messages to the main thread.
//!
//! Slots flow pacer -> idle connection (FIFO) or, when every connection is busy, pacer -> queue (FIFO)
//! -> the next connection to finish. A connection is a task that loops: take the next due slot, send,
//! read the whole answer, record, repeat.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::{Notify, Semaphore};

use crate::clock::{mono_ns, ns_to_us};
use crate::config::{share, Config};
use crate::http::{read_response, RecvBuf, RespError};
use crate::pacer::{Pacer, WakeTimer, MAX_SLEEP_NS};
use crate::schedule::{Schedule, Slot};
use crate::stats::{new_hist, MixStats, Stats};

/// State shared by all threads of a run (atomics only).
#[derive(Default)]
pub struct Global {
    /// Stop the schedule (first SIGINT/SIGTERM).
    pub interrupted: AtomicBool,
    /// Stop waiting for outstanding answers too (second signal).
    pub hurry: AtomicBool,
    pub in_flight: AtomicI64,
    pub max_in_flight: AtomicI64,
    pub queued: AtomicI64,
    pub max_queued: AtomicI64,
}

/// After an interrupt, outstanding answers are waited for at most this long (or --timeout if shorter).
pub const INTERRUPT_GRACE_NS: u64 = 2_000_000_000;

pub enum Msg {
    Ready { thread: usize, opened: u64, failed: u64, idle_opened: u64, first_error: Option<String> },
    Interval { thread: usize, index: u64, acc: Box<IntervalAcc> },
    Done { thread: usize, result: Box<WorkerResult> },
}

/// One interval of the main requests, by completion time: their latencies and how many completed, how
/// many of those were not 2xx, and how many failed without an answer (timeout, read, write, connect).
pub struct IntervalAcc {
    pub hist: Histogram<u64>,
    pub completed: u64,
    pub non_2xx: u64,
    pub errors: u64,
}

impl Default for IntervalAcc {
    fn default() -> Self {
        IntervalAcc { hist: new_hist(), completed: 0, non_2xx: 0, errors: 0 }
    }
}

pub struct WorkerResult {
    pub stats: Stats,
    /// The mixed-in requests (None without --mix-authorization).
    pub mix: Option<MixStats>,
    /// Slots this thread released (its part of `scheduled`).
    pub released: u64,
    /// When the pacer was stopped early by a signal (None when the schedule ran to its end).
    pub stopped_at_ns: Option<u64>,
    pub idle_opened: u64,
    pub idle_open_at_end: u64,
    /// A failure of the thread itself (timerfd), which makes the run fail.
    pub error: Option<String>,
}

/// A connection task's mailbox: the pacer hands a slot straight to an idle connection through it.
#[derive(Default)]
struct ConnCell {
    mailbox: Cell<Option<Slot>>,
    waker: RefCell<Option<Waker>>,
    /// The slot the connection is working on (for the end-of-run accounting).
    current: Cell<Option<Slot>>,
}

impl ConnCell {
    fn deliver(&self, slot: Slot) {
        self.mailbox.set(Some(slot));
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }
}

struct WaitSlot<'a>(&'a ConnCell);

impl Future for WaitSlot<'_> {
    type Output = Slot;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Slot> {
        if let Some(s) = self.0.mailbox.take() {
            return Poll::Ready(s);
        }
        let mut w = self.0.waker.borrow_mut();
        match w.as_ref() {
            Some(old) if old.will_wake(cx.waker()) => {}
            _ => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

struct Shared {
    cfg: Arc<Config>,
    global: Arc<Global>,
    queue: RefCell<VecDeque<Slot>>,
    idle: RefCell<VecDeque<Rc<ConnCell>>>,
    cells: RefCell<Vec<Rc<ConnCell>>>,
    stats: RefCell<Stats>,
    mix_stats: RefCell<Option<MixStats>>,
    interval: RefCell<IntervalAcc>,
    released: Cell<u64>,
    finished: Cell<u64>,
    pacer_done: Cell<bool>,
    all_done: Notify,
    connecting: Cell<usize>,
    connected: Notify,
    connect_sem: Semaphore,
    first_error: RefCell<Option<String>>,
    idle_streams: RefCell<Vec<std::net::TcpStream>>,
    /// This thread's part of the schedule (set once the start time is known).
    pacer: OnceCell<Pacer>,
    timer: WakeTimer,
    /// Set when the pacer has released its last slot or was stopped; `pacer_end` says when it stopped.
    pacer_finished: Notify,
    stopped_at: Cell<Option<u64>>,
    /// The timer also wakes the thread at least this often (to notice a signal, emit interval reports).
    next_housekeeping: Cell<u64>,
    /// (index, CLOCK_MONOTONIC time, interval) of the next interval report.
    next_report: Cell<Option<(u64, u64, u64)>>,
    thread: usize,
    tx: UnboundedSender<Msg>,
    error: RefCell<Option<String>>,
}

thread_local! {
    /// The worker state of this thread, for the runtime's park/unpark hooks.
    static CURRENT: RefCell<Option<Rc<Shared>>> = const { RefCell::new(None) };
}

fn with_current(f: impl FnOnce(&Shared)) {
    CURRENT.with(|c| {
        if let Ok(b) = c.try_borrow() {
            if let Some(sh) = b.as_ref() {
                f(sh)
            }
        }
    })
}

fn bump_max(cur: &AtomicI64, max: &AtomicI64, delta: i64) {
    let v = cur.fetch_add(delta, Relaxed) + delta;
    if delta > 0 && v > max.load(Relaxed) {
        max.fetch_max(v, Relaxed);
    }
}

impl Shared {
    fn release(&self, slot: Slot) {
        self.stats.borrow_mut().pacer_lag.saturating_record(ns_to_us(slot.released - slot.intended));
        self.released.set(self.released.get() + 1);
        let idle = self.idle.borrow_mut().pop_front();
        match idle {
            Some(c) => c.deliver(slot),
            None => {
                let mut q = self.queue.borrow_mut();
                q.push_back(slot);
                bump_max(&self.global.queued, &self.global.max_queued, 1);
            }
        }
    }

    /// Release every slot due at `now` (any wake-up of the thread may do it: the timer, an answer, the
    /// runtime waking or about to sleep), and do the periodic chores.
    fn pace(&self, now: u64) {
        let Some(p) = self.pacer.get() else { return };
        if self.pacer_done.get() {
            return;
        }
        if now >= self.next_housekeeping.get() {
            self.next_housekeeping.set(now + MAX_SLEEP_NS);
        }
        if let Some((mut index, mut at, iv)) = self.next_report.get() {
            if now >= at {
                while now >= at {
                    let acc = self.interval.replace(IntervalAcc::default());
                    let _ = self.tx.send(Msg::Interval { thread: self.thread, index, acc: Box::new(acc) });
                    index += 1;
                    at += iv;
                }
                self.next_report.set(Some((index, at, iv)));
            }
        }
        if self.global.interrupted.load(Relaxed) && !p.done() {
            p.stop();
            self.stopped_at.set(Some(now));
        }
        p.release_due(now, |slot| self.release(slot));
        if p.done() {
            self.pacer_done.set(true);
            self.pacer_finished.notify_one();
        }
    }

    /// The runtime is about to sleep: release what is due, and arm the timer for the next slot. The timer
    /// is armed only here, so a thread kept busy by answers paces itself from `pace` calls and takes no
    /// timer interrupts at all.
    fn before_park(&self) {
        if self.pacer.get().is_none() || self.pacer_done.get() {
            return;
        }
        self.pace(mono_ns());
        if self.pacer_done.get() {
            return;
        }
        let p = self.pacer.get().expect("checked");
        let mut at = self.next_housekeeping.get();
        if let Some(w) = p.wake_at() {
            at = at.min(w);
        }
        if let Some((_, r, _)) = self.next_report.get() {
            at = at.min(r);
        }
        if let Err(e) = self.timer.arm(at) {
            self.fail(format!("cannot arm the pacer's timerfd: {e}"));
        }
    }

    fn fail(&self, what: String) {
        self.error.borrow_mut().get_or_insert(what);
        if let Some(p) = self.pacer.get() {
            if !p.done() {
                p.stop();
                self.stopped_at.set(Some(mono_ns()));
            }
        }
        self.pacer_done.set(true);
        self.pacer_finished.notify_one();
    }

    fn next_queued(&self) -> Option<Slot> {
        let s = self.queue.borrow_mut().pop_front();
        if s.is_some() {
            self.global.queued.fetch_sub(1, Relaxed);
        }
        s
    }

    fn note_error(&self, what: String) {
        let mut e = self.first_error.borrow_mut();
        if e.is_none() {
            *e = Some(what);
        }
    }

    fn connect_done_one(&self) {
        let left = self.connecting.get() - 1;
        self.connecting.set(left);
        if left == 0 {
            self.connected.notify_one();
        }
    }

    /// The mix line this slot sends, or None for the main pool (decided by the slot: see config::Mix).
    fn mix_line(&self, slot: &Slot) -> Option<usize> {
        self.cfg.mix.as_ref().and_then(|m| m.line_for(slot.intended, self.cfg.seed))
    }

    fn finish(&self, slot: Slot, out: Outcome, sent: bool) {
        let now = mono_ns();
        let lat = ns_to_us(now.saturating_sub(slot.charged_from(self.cfg.pacer_window_ns)));
        if let Some(line) = self.mix_line(&slot) {
            // kept apart: its own statuses, errors and latencies, out of the main figures and intervals
            let mut guard = self.mix_stats.borrow_mut();
            let mx = guard.as_mut().expect("mix stats exist with a mix");
            match out {
                Outcome::Status(code) => {
                    mx.completed += 1;
                    *mx.by_line[line].entry(code).or_insert(0) += 1;
                    mx.latency.saturating_record(lat);
                }
                Outcome::Timeout => {
                    mx.errors.timeout += 1;
                    mx.latency.saturating_record(lat);
                }
                Outcome::ReadError => mx.errors.read += 1,
                Outcome::WriteError => mx.errors.write += 1,
                Outcome::ConnectError => mx.errors.connect += 1,
            }
        } else {
            let mut st = self.stats.borrow_mut();
            let mut iv = self.interval.borrow_mut();
            match out {
                Outcome::Status(code) => {
                    st.completed += 1;
                    st.statuses[(code as usize).min(999)] += 1;
                    st.latency.saturating_record(lat);
                    iv.hist.saturating_record(lat);
                    iv.completed += 1;
                    if !(200..300).contains(&code) {
                        iv.non_2xx += 1;
                    }
                }
                Outcome::Timeout => {
                    st.errors.timeout += 1;
                    st.latency.saturating_record(lat);
                    iv.errors += 1;
                }
                Outcome::ReadError => {
                    st.errors.read += 1;
                    iv.errors += 1;
                }
                Outcome::WriteError => {
                    st.errors.write += 1;
                    iv.errors += 1;
                }
                Outcome::ConnectError => iv.errors += 1, // counted in st.errors where it happened
            }
        }
        if sent {
            self.global.in_flight.fetch_sub(1, Relaxed);
        }
        self.finished.set(self.finished.get() + 1);
        if self.pacer_done.get() {
            if self.finished.get() == self.released.get() {
                self.all_done.notify_one();
            }
        } else {
            // Awake anyway: release what has come due since the last wake.
            self.pace(now);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Status(u16),
    Timeout,
    ReadError,
    WriteError,
    ConnectError,
}

struct Conn {
    stream: Option<TcpStream>,
    rb: RecvBuf,
    rng: fastrand::Rng,
    /// Answers received on the current stream (a reused stream may have been closed by the server).
    served: u64,
    /// The current slot's request has been sent (counted in flight, send lag recorded).
    sent: bool,
}

impl Conn {
    async fn connect(&mut self, sh: &Shared) -> Result<(), ()> {
        self.stream = None;
        let r = tokio::time::timeout(Duration::from_nanos(sh.cfg.timeout_ns), TcpStream::connect(sh.cfg.target.addr)).await;
        match r {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                self.stream = Some(s);
                self.served = 0;
                self.rb.clear();
                sh.stats.borrow_mut().connections_opened += 1;
                Ok(())
            }
            Ok(Err(e)) => {
                sh.stats.borrow_mut().errors.connect += 1;
                sh.note_error(format!("connect to {}: {e}", sh.cfg.target.addr));
                Err(())
            }
            Err(_) => {
                sh.stats.borrow_mut().errors.connect += 1;
                sh.note_error(format!("connect to {}: timed out", sh.cfg.target.addr));
                Err(())
            }
        }
    }

    /// Send the slot's request and read its answer, reconnecting first if needed. A reused connection that
    /// turns out closed before any byte of the answer arrived is replaced and the request sent once more.
    async fn exchange(&mut self, sh: &Shared, slot: Slot) -> Outcome {
        let mut retried = false;
        loop {
            if self.stream.is_none() && self.connect(sh).await.is_err() {
                return Outcome::ConnectError;
            }
            let reused = self.served > 0;
            if !self.sent {
                self.sent = true;
                let now = mono_ns();
                sh.stats.borrow_mut().send_lag.saturating_record(ns_to_us(now.saturating_sub(slot.intended)));
                bump_max(&sh.global.in_flight, &sh.global.max_in_flight, 1);
            }
            let req = match (sh.mix_line(&slot), sh.cfg.mix.as_ref()) {
                (Some(line), Some(mix)) => mix.requests.get(line),
                _ => sh.cfg.requests.get(self.rng.usize(..sh.cfg.requests.len())),
            };
            let stream = self.stream.as_mut().expect("connected");
            if stream.write_all(req).await.is_err() {
                self.stream = None;
                if reused && !retried {
                    retried = true;
                    sh.stats.borrow_mut().retries += 1;
                    continue;
                }
                return Outcome::WriteError;
            }
            match read_response(stream, &mut self.rb).await {
                Ok(head) => {
                    self.served += 1;
                    if !head.keep_alive {
                        self.stream = None;
                    }
                    return Outcome::Status(head.status);
                }
                Err(RespError::Io { got_bytes: false, .. }) if reused && !retried => {
                    self.stream = None;
                    retried = true;
                    sh.stats.borrow_mut().retries += 1;
                }
                Err(_) => {
                    self.stream = None;
                    return Outcome::ReadError;
                }
            }
        }
    }
}

async fn conn_task(sh: Rc<Shared>, cell: Rc<ConnCell>, seed: u64) {
    let mut c = Conn { stream: None, rb: RecvBuf::default(), rng: fastrand::Rng::with_seed(seed), served: 0, sent: false };
    {
        let _permit = sh.connect_sem.acquire().await;
        let _ = c.connect(&sh).await;
    }
    sh.connect_done_one();
    let timeout = Duration::from_nanos(sh.cfg.timeout_ns);
    let mut sleep = Box::pin(tokio::time::sleep(timeout));
    loop {
        let slot = match sh.next_queued() {
            Some(s) => s,
            None => {
                sh.idle.borrow_mut().push_back(cell.clone());
                WaitSlot(&cell).await
            }
        };
        cell.current.set(Some(slot));
        sleep.as_mut().reset(tokio::time::Instant::now() + timeout);
        let out = tokio::select! {
            biased;
            out = c.exchange(&sh, slot) => out,
            _ = sleep.as_mut() => Outcome::Timeout,
        };
        cell.current.set(None);
        if out == Outcome::Timeout {
            c.stream = None; // dropped; reopened when next needed
        }
        let sent = std::mem::take(&mut c.sent);
        sh.finish(slot, out, sent);
    }
}

/// Wakes the thread when the timer fires (armed in `before_park`) and paces.
async fn pacer_task(sh: Rc<Shared>) {
    while !sh.pacer_done.get() {
        if let Err(e) = sh.timer.fired().await {
            sh.fail(format!("pacer timerfd failed: {e}"));
            return;
        }
        sh.pace(mono_ns());
    }
}

async fn idle_task(sh: Rc<Shared>) {
    {
        let _permit = sh.connect_sem.acquire().await;
        let r = tokio::time::timeout(Duration::from_nanos(sh.cfg.timeout_ns), TcpStream::connect(sh.cfg.target.addr)).await;
        match r.ok().and_then(|r| r.ok()).and_then(|s| s.into_std().ok()) {
            Some(s) => sh.idle_streams.borrow_mut().push(s),
            None => sh.stats.borrow_mut().idle_connect_errors += 1,
        }
    }
    sh.connect_done_one();
}

/// Is this idle connection still open? (reads whatever the server sent; EOF or an error means closed)
fn still_open(s: &std::net::TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reading into a local buffer from a socket we own.
        let n = unsafe { libc::recv(s.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), libc::MSG_DONTWAIT) };
        if n > 0 {
            continue;
        }
        if n == 0 {
            return false;
        }
        let e = std::io::Error::last_os_error();
        return e.kind() == std::io::ErrorKind::WouldBlock;
    }
}

/// The body of worker thread `thread`: open its connections, report ready, wait for the start time,
/// run its part of the schedule, wait for the answers, account for the unanswered.
pub fn worker_main(
    thread: usize,
    cfg: Arc<Config>,
    global: Arc<Global>,
    tx: UnboundedSender<Msg>,
    start_rx: std::sync::mpsc::Receiver<u64>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .on_thread_park(|| with_current(|sh| sh.before_park()))
        .on_thread_unpark(|| with_current(|sh| sh.pace(mono_ns())))
        .build();
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            let mut r = empty_result();
            r.error = Some(format!("cannot start a runtime: {e}"));
            let _ = tx.send(Msg::Done { thread, result: Box::new(r) });
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    let result = {
        let _guard = rt.enter();
        match WakeTimer::new() {
            Ok(timer) => local.block_on(&rt, worker(thread, cfg, global, tx.clone(), timer, start_rx)),
            Err(e) => {
                let mut r = empty_result();
                r.error = Some(format!("cannot create a timerfd: {e}"));
                r
            }
        }
    };
    CURRENT.with(|c| c.borrow_mut().take());
    {
        let _guard = rt.enter();
        drop(local); // closes the connections
    }
    let _ = tx.send(Msg::Done { thread, result: Box::new(result) });
}

fn empty_result() -> WorkerResult {
    WorkerResult {
        stats: Stats::default(),
        mix: None,
        released: 0,
        stopped_at_ns: None,
        idle_opened: 0,
        idle_open_at_end: 0,
        error: None,
    }
}

async fn worker(
    thread: usize,
    cfg: Arc<Config>,
    global: Arc<Global>,
    tx: UnboundedSender<Msg>,
    timer: WakeTimer,
    start_rx: std::sync::mpsc::Receiver<u64>,
) -> WorkerResult {
    let threads = cfg.threads;
    let n_conns = share(cfg.connections, threads, thread);
    let n_idle = share(cfg.idle_connections, threads, thread);
    let permits = share(cfg.connect_concurrency.max(threads), threads, thread).max(1);
    let sh = Rc::new(Shared {
        cfg: cfg.clone(),
        global: global.clone(),
        queue: RefCell::new(VecDeque::with_capacity(1024)),
        idle: RefCell::new(VecDeque::with_capacity(n_conns)),
        cells: RefCell::new(Vec::with_capacity(n_conns)),
        stats: RefCell::new(Stats::default()),
        mix_stats: RefCell::new(cfg.mix.as_ref().map(|m| MixStats::new(m.requests.len()))),
        interval: RefCell::new(IntervalAcc::default()),
        released: Cell::new(0),
        finished: Cell::new(0),
        pacer_done: Cell::new(false),
        all_done: Notify::new(),
        connecting: Cell::new(n_conns + n_idle),
        connected: Notify::new(),
        connect_sem: Semaphore::new(permits),
        first_error: RefCell::new(None),
        idle_streams: RefCell::new(Vec::with_capacity(n_idle)),
        pacer: OnceCell::new(),
        timer,
        pacer_finished: Notify::new(),
        stopped_at: Cell::new(None),
        next_housekeeping: Cell::new(0),
        next_report: Cell::new(None),
        thread,
        tx: tx.clone(),
        error: RefCell::new(None),
    });
    let mut seeds = fastrand::Rng::with_seed(cfg.seed ^ (thread as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    for _ in 0..n_conns {
        let cell = Rc::new(ConnCell::default());
        sh.cells.borrow_mut().push(cell.clone());
        tokio::task::spawn_local(conn_task(sh.clone(), cell, seeds.u64(..)));
    }
    for _ in 0..n_idle {
        tokio::task::spawn_local(idle_task(sh.clone()));
    }
    if n_conns + n_idle > 0 {
        sh.connected.notified().await;
    }
    let (opened, failed, idle_opened) = {
        let st = sh.stats.borrow();
        (st.connections_opened, st.errors.connect, sh.idle_streams.borrow().len() as u64)
    };
    let _ = tx.send(Msg::Ready { thread, opened, failed, idle_opened, first_error: sh.first_error.borrow().clone() });
    // The only blocking wait: nothing else is due on this thread until the schedule starts.
    let Ok(start) = start_rx.recv() else {
        let mut r = empty_result();
        r.stats = sh.stats.replace(Stats::default());
        return r;
    };

    let sched = Schedule::with_arrivals(start, cfg.rate, cfg.duration_ns, threads as u64, cfg.arrivals, cfg.seed);
    sh.next_housekeeping.set(start);
    sh.next_report.set(cfg.report_interval_ns.map(|iv| (0u64, start + iv, iv)));
    let _ = sh.pacer.set(Pacer::new(sched, thread as u64, cfg.pacer_window_ns));
    CURRENT.with(|c| *c.borrow_mut() = Some(sh.clone()));
    tokio::task::spawn_local(pacer_task(sh.clone()));
    sh.pace(mono_ns());
    if !sh.pacer_done.get() {
        sh.pacer_finished.notified().await;
    }
    let stopped_at_ns = sh.stopped_at.get();
    let error = sh.error.borrow().clone();
    if cfg.no_sends_after_end {
        drop_unsent(&sh, mono_ns());
    }

    // Wait for the window's outstanding requests, up to --timeout after the schedule's end.
    let now = mono_ns();
    let deadline = if stopped_at_ns.is_some() {
        now + cfg.timeout_ns.min(INTERRUPT_GRACE_NS)
    } else {
        sched.end_ns().max(now) + cfg.timeout_ns
    };
    loop {
        if sh.finished.get() >= sh.released.get() || global.hurry.load(Relaxed) {
            break;
        }
        let now = mono_ns();
        if now >= deadline {
            break;
        }
        let wait = Duration::from_nanos((deadline - now).min(50_000_000));
        let _ = tokio::time::timeout(wait, sh.all_done.notified()).await;
    }

    // Whatever is still unanswered counts as timed out, with its latency so far: a stall is never hidden.
    let now = mono_ns();
    let mut st = sh.stats.replace(Stats::default());
    let mut mix = sh.mix_stats.borrow_mut().take();
    let mut charge = |slot: Slot, sent: bool| {
        let waited = ns_to_us(now.saturating_sub(slot.intended));
        let lat = ns_to_us(now.saturating_sub(slot.charged_from(sh.cfg.pacer_window_ns)));
        if !sent {
            st.send_lag.saturating_record(waited);
        }
        match (sh.mix_line(&slot), mix.as_mut()) {
            (Some(_), Some(mx)) => {
                mx.latency.saturating_record(lat);
                mx.errors.timeout += 1;
                mx.unfinished += 1;
            }
            _ => {
                st.latency.saturating_record(lat);
                st.errors.timeout += 1;
                st.unfinished += 1;
            }
        }
    };
    for slot in sh.queue.borrow_mut().drain(..) {
        charge(slot, false);
    }
    for cell in sh.cells.borrow().iter() {
        if let Some(slot) = cell.mailbox.take() {
            charge(slot, false);
        }
        if let Some(slot) = cell.current.take() {
            charge(slot, true);
        }
    }
    let idle_open_at_end = sh.idle_streams.borrow().iter().filter(|s| still_open(s)).count() as u64;
    let idle_opened = sh.idle_streams.borrow().len() as u64;
    WorkerResult {
        stats: st,
        mix,
        released: sh.released.get(),
        stopped_at_ns,
        idle_opened,
        idle_open_at_end,
        error,
    }
}

/// --no-sends-after-end: the slots this thread still holds when the schedule ends are never sent. Each is
/// charged as a timeout with the time it waited (a backlog is never hidden), counted as unsent, and finished.
fn drop_unsent(sh: &Shared, now: u64) {
    let dropped: Vec<Slot> = sh.queue.borrow_mut().drain(..).collect();
    if dropped.is_empty() {
        return;
    }
    sh.global.queued.fetch_sub(dropped.len() as i64, Relaxed);
    let mut st = sh.stats.borrow_mut();
    let mut mix = sh.mix_stats.borrow_mut();
    for slot in &dropped {
        let lat = ns_to_us(now.saturating_sub(slot.charged_from(sh.cfg.pacer_window_ns)));
        match (sh.mix_line(slot), mix.as_mut()) {
            (Some(_), Some(mx)) => {
                mx.latency.saturating_record(lat);
                mx.errors.timeout += 1;
                mx.unfinished += 1;
            }
            _ => {
                st.send_lag.saturating_record(ns_to_us(now.saturating_sub(slot.intended)));
                st.latency.saturating_record(lat);
                st.errors.timeout += 1;
                st.unsent += 1;
            }
        }
    }
    sh.finished.set(sh.finished.get() + dropped.len() as u64);
}
