//! The main thread: start the workers, hand them one start time, relay interval reports, handle
//! SIGINT/SIGTERM, merge the results and build the final JSON line.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::signal::unix::{signal, SignalKind};

use crate::clock::mono_ns;
use crate::config::Config;
use crate::schedule::Schedule;
use crate::stats::{encode, summary, MixStats, Stats};
use crate::worker::{worker_main, Global, IntervalAcc, Msg};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Lead time between "all connections open" and the first slot when no start time is given.
const START_LEAD_NS: u64 = 2_000_000;

pub struct Usage {
    pub user_s: f64,
    pub system_s: f64,
    pub max_rss_kb: i64,
    pub voluntary_switches: i64,
    pub involuntary_switches: i64,
}

pub fn rusage() -> Usage {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    Usage {
        user_s: secs(ru.ru_utime),
        system_s: secs(ru.ru_stime),
        max_rss_kb: ru.ru_maxrss,
        voluntary_switches: ru.ru_nvcsw,
        involuntary_switches: ru.ru_nivcsw,
    }
}

/// Raise the soft open-files limit to the hard limit; returns the limit now in force.
pub fn raise_nofile() -> u64 {
    // SAFETY: plain get/setrlimit on a local struct.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                return lim.rlim_max as u64;
            }
        }
        lim.rlim_cur as u64
    }
}

/// Run the whole thing; Err is a fatal problem (one line, exit 2).
pub fn run(cfg: Config) -> Result<Value, String> {
    let limit = raise_nofile();
    let need = (cfg.connections + cfg.idle_connections + 64) as u64;
    if need > limit {
        return Err(format!(
            "{} connections + {} idle need about {need} open files but the limit is {limit}: raise `ulimit -Hn` or open fewer",
            cfg.connections, cfg.idle_connections
        ));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    rt.block_on(orchestrate(Arc::new(cfg)))
}

async fn orchestrate(cfg: Arc<Config>) -> Result<Value, String> {
    let global = Arc::new(Global::default());
    let mut sigint = signal(SignalKind::interrupt()).map_err(|e| format!("cannot handle SIGINT: {e}"))?;
    let mut sigterm = signal(SignalKind::terminate()).map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
    let on_signal = |g: &Global| {
        if g.interrupted.swap(true, Relaxed) {
            g.hurry.store(true, Relaxed);
            eprintln!("openloop: second signal: not waiting for outstanding answers");
        } else {
            eprintln!("openloop: interrupted: stopping the schedule (signal again to stop waiting)");
        }
    };

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Msg>();
    let mut start_txs = Vec::new();
    let mut handles = Vec::new();
    for k in 0..cfg.threads {
        let (stx, srx) = std::sync::mpsc::channel::<u64>();
        start_txs.push(stx);
        let (cfg, global, tx) = (cfg.clone(), global.clone(), tx.clone());
        let h = std::thread::Builder::new()
            .name(format!("openloop-{k}"))
            .spawn(move || worker_main(k, cfg, global, tx, srx))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        handles.push(h);
    }
    drop(tx);

    // 1. every connection opened (or failed)
    let t_connect = mono_ns();
    let (mut ready, mut opened, mut failed, mut idle_opened) = (0, 0u64, 0u64, 0u64);
    let mut first_error: Option<String> = None;
    let mut done: Vec<Option<Box<crate::worker::WorkerResult>>> = (0..cfg.threads).map(|_| None).collect();
    while ready < cfg.threads {
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(Msg::Ready { opened: o, failed: f, idle_opened: i, first_error: e, .. }) => {
                    ready += 1;
                    opened += o;
                    failed += f;
                    idle_opened += i;
                    if first_error.is_none() { first_error = e; }
                }
                Some(Msg::Done { thread, result }) => {
                    return Err(format!("thread {thread} failed before the start: {}", result.error.unwrap_or_default()));
                }
                Some(Msg::Interval { .. }) => {}
                None => return Err("a worker thread died before the start".into()),
            },
            _ = sigint.recv() => on_signal(&global),
            _ = sigterm.recv() => on_signal(&global),
        }
    }
    if opened == 0 && cfg.connections > 0 && !global.interrupted.load(Relaxed) {
        let why = first_error.unwrap_or_else(|| "no connection".into());
        return Err(format!("cannot connect to {} ({why}): start the server or fix --url", cfg.url));
    }
    let connect_s = (mono_ns() - t_connect) as f64 / 1e9;
    if failed > 0 {
        eprintln!(
            "openloop: warning: {failed} of {} connections failed to open ({}); they are retried when needed",
            cfg.connections,
            first_error.as_deref().unwrap_or("?")
        );
    }
    if cfg.idle_connections > 0 {
        eprintln!("openloop: {idle_opened} of {} idle connections open", cfg.idle_connections);
    }

    // 2. one start time for every thread
    let now = mono_ns();
    let start = cfg.start_at_ns.unwrap_or(now + START_LEAD_NS);
    if start < now {
        eprintln!(
            "openloop: warning: --start-at-monotonic-ns is {:.1} ms in the past: the first slots are released late (see pacer_lag_us)",
            (now - start) as f64 / 1e6
        );
    }
    let usage_at_start = rusage();
    for stx in &start_txs {
        let _ = stx.send(start);
    }
    eprintln!(
        "openloop: {opened} connections open in {connect_s:.2} s; {} req/s for {:.3} s on {} thread(s)",
        cfg.rate,
        cfg.duration_ns as f64 / 1e9,
        cfg.threads
    );

    // 3. interval reports until every thread is done
    // per interval index: (threads reported, their merged counts)
    let mut intervals: BTreeMap<u64, (usize, IntervalAcc)> = BTreeMap::new();
    let mut n_done = 0;
    while n_done < cfg.threads {
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(Msg::Interval { index, acc, .. }) => {
                    let e = intervals.entry(index).or_insert_with(|| (0, IntervalAcc::default()));
                    e.0 += 1;
                    e.1.hist.add(&acc.hist).expect("same bounds");
                    e.1.completed += acc.completed;
                    e.1.non_2xx += acc.non_2xx;
                    e.1.errors += acc.errors;
                    if e.0 == cfg.threads {
                        let (_, a) = intervals.remove(&index).expect("present");
                        let h = &a.hist;
                        let iv = cfg.report_interval_ns.unwrap_or(0) as f64 / 1e9;
                        let line = json!({
                            "type": "interval",
                            "t_s": round3((index + 1) as f64 * iv),
                            "completed": a.completed,
                            "p50_us": if h.is_empty() { 0 } else { h.value_at_percentile(50.0) },
                            "p99_us": if h.is_empty() { 0 } else { h.value_at_percentile(99.0) },
                            "max_us": if h.is_empty() { 0 } else { h.max() },
                            "non_2xx": a.non_2xx,
                            "errors": a.errors,
                        });
                        println!("{line}");
                    }
                }
                Some(Msg::Done { thread, result }) => {
                    done[thread] = Some(result);
                    n_done += 1;
                }
                Some(Msg::Ready { .. }) => {}
                None => break,
            },
            _ = sigint.recv() => on_signal(&global),
            _ = sigterm.recv() => on_signal(&global),
        }
    }
    for h in handles {
        let _ = h.join();
    }
    if done.iter().any(|d| d.is_none()) {
        return Err("a worker thread died during the run".into());
    }
    let results: Vec<_> = done.into_iter().map(|d| d.expect("checked")).collect();
    if let Some(e) = results.iter().find_map(|r| r.error.clone()) {
        return Err(e);
    }

    // 4. the result
    let usage = rusage();
    let mut stats = Stats::default();
    let mut mix: Option<MixStats> = cfg.mix.as_ref().map(|m| MixStats::new(m.requests.len()));
    for r in &results {
        stats.merge(&r.stats);
        if let (Some(all), Some(one)) = (mix.as_mut(), r.mix.as_ref()) {
            all.merge(one);
        }
    }
    let sched = Schedule::with_arrivals(start, cfg.rate, cfg.duration_ns, cfg.threads as u64, cfg.arrivals, cfg.seed);
    let interrupted = global.interrupted.load(Relaxed);
    let stopped_at = results.iter().filter_map(|r| r.stopped_at_ns).max();
    let window_ns = match stopped_at {
        Some(at) => at.saturating_sub(start).min(cfg.duration_ns),
        None => cfg.duration_ns,
    };
    let duration_s = window_ns as f64 / 1e9;
    let scheduled: u64 = results.iter().map(|r| r.released).sum();
    let achieved = if duration_s > 0.0 { stats.completed as f64 / duration_s } else { 0.0 };
    let pacer_p99_us = if stats.pacer_lag.is_empty() { 0 } else { stats.pacer_lag.value_at_percentile(99.0) };
    let behind = pacer_p99_us as f64 > cfg.max_pacer_lag_ms * 1000.0;
    if behind {
        eprintln!(
            "openloop: warning: generator behind: pacer lag p99 {} us > {} ms; the rate is too high for this machine or thread count",
            pacer_p99_us, cfg.max_pacer_lag_ms
        );
    }
    let max_queued = global.max_queued.load(Relaxed).max(0);
    Ok(json!({
        "type": "result",
        "generator": format!("openloop {VERSION}"),
        "url": cfg.url,
        "target_rps": cfg.rate,
        "duration_s": duration_s,
        "planned_duration_s": cfg.duration_ns as f64 / 1e9,
        "threads": cfg.threads,
        "connections": cfg.connections,
        "timeout_s": cfg.timeout_ns as f64 / 1e9,
        "tokens": cfg.tokens,
        "schedule_start_monotonic_ns": start,
        "schedule_end_monotonic_ns": start + window_ns,
        "scheduled": scheduled,
        "planned_slots": sched.total,
        "arrivals": cfg.arrivals.name(),
        "completed": stats.completed,
        "achieved_rps": round3(achieved),
        "statuses": stats.statuses_json(),
        "errors": {
            "connect": stats.errors.connect,
            "read": stats.errors.read,
            "write": stats.errors.write,
            "timeout": stats.errors.timeout,
        },
        "unfinished_at_end": stats.unfinished,
        "unsent_at_end": stats.unsent,
        "latency_us": summary(&stats.latency),
        "latency_hdr": encode(&stats.latency),
        "send_lag_us": summary(&stats.send_lag),
        "send_lag_hdr": encode(&stats.send_lag),
        "pacer_lag_us": summary(&stats.pacer_lag),
        "pacer_lag_hdr": encode(&stats.pacer_lag),
        "max_in_flight": global.max_in_flight.load(Relaxed).max(0),
        "max_queued": max_queued,
        "connections_opened": stats.connections_opened,
        "retries": stats.retries,
        "idle_connections": cfg.idle_connections,
        "idle_connections_opened": results.iter().map(|r| r.idle_opened).sum::<u64>(),
        "idle_connections_open_at_end": results.iter().map(|r| r.idle_open_at_end).sum::<u64>(),
        "idle_connect_errors": stats.idle_connect_errors,
        "connect_s": round3(connect_s),
        "cpu_user_s": round3(usage.user_s),
        "cpu_system_s": round3(usage.system_s),
        "cpu_before_start_s": round3(usage_at_start.user_s + usage_at_start.system_s),
        "max_rss_kb": usage.max_rss_kb,
        "context_switches": {
            "voluntary": usage.voluntary_switches - usage_at_start.voluntary_switches,
            "involuntary": usage.involuntary_switches - usage_at_start.involuntary_switches,
        },
        "max_pacer_lag_ms": cfg.max_pacer_lag_ms,
        "pacer_window_us": cfg.pacer_window_ns as f64 / 1000.0,
        "generator_behind": behind,
        "interrupted": interrupted,
        "mix": match (&mix, &cfg.mix) {
            (Some(m), Some(c)) => m.to_json(c.fraction),
            _ => Value::Null,
        },
    }))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

