use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use openloop::config::{load_tokens, parse_url, Config, Mix, Requests};

const MODEL: &str = "\
The model: one schedule for the whole run. Request i is due at start + i/rate; with T threads, thread k
owns the slots i = k mod T, so it is still one schedule. Each thread has a pacer (a timerfd with absolute
CLOCK_MONOTONIC deadlines) that never releases a slot early; dense slots are released in batches of at
most --pacer-window-us (each at most that late, shown as pacer lag), because every wake-up is costly. A
released slot goes to the longest-idle connection, or, when every connection is busy, waits in a FIFO
queue for the next free one. Latency is measured from the slot's intended time, moved later only by that
deliberate batching (at most the window, as wrk2's 1-ms timer tick); time spent waiting for a connection,
reconnecting, behind a stalled server, or any pacer lateness beyond the window is charged to the request
(no coordinated omission).

Output: progress and warnings on stderr; on stdout optional interval lines ({\"type\":\"interval\",...}) and
exactly one final line {\"type\":\"result\",...} (see README.md for the fields). Exit 2 on a fatal error.";

/// Open-model (constant-rate) HTTP/1.1 load generator with exact coordinated-omission correction.
#[derive(Parser, Debug)]
#[command(name = "openloop", version, after_long_help = MODEL)]
struct Cli {
    /// Target, http://HOST[:PORT]/PATH (loopback hosts only unless --allow-remote)
    #[arg(long)]
    url: String,
    /// Requests per second (the schedule's rate, all threads together)
    #[arg(long)]
    rate: f64,
    /// Length of the schedule in seconds
    #[arg(long)]
    duration: f64,
    /// Keep-alive connections used for the load (split over the threads)
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// OS threads, each with its own runtime, pacer and share of the connections
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Token pool, one per line; each request carries `Authorization: Bearer <random token>`
    #[arg(long)]
    tokens: Option<PathBuf>,
    /// Per-request timeout in seconds; also how long the unanswered are waited for after the schedule
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Slots still queued in the generator when the schedule ends are dropped, never sent (counted as
    /// `unsent_at_end` and as timeouts, with the time they waited); only requests in flight are awaited.
    /// For a run whose backlog must not reach the server after its end (an overload before a recovery run)
    #[arg(long)]
    no_sends_after_end: bool,
    /// Extra connections opened at start and held open without sending anything
    #[arg(long, default_value_t = 0)]
    idle_connections: usize,
    /// Print one {"type":"interval",...} line per this many seconds of the schedule
    #[arg(long)]
    report_interval: Option<f64>,
    /// Start the schedule at this CLOCK_MONOTONIC time (ns) instead of as soon as connections are open
    #[arg(long)]
    start_at_monotonic_ns: Option<u64>,
    /// Report generator_behind when the pacer's own lateness p99 exceeds this (milliseconds)
    #[arg(long, default_value_t = 1.0)]
    max_pacer_lag_ms: f64,
    /// Pacer batch span (µs): this thread's next slot and those due within this span after it are
    /// released together when the last of them is due (each at most this late); slots further apart go
    /// one by one, on time. Wake-ups cost 15-20 µs of CPU here; see README. 0 = never batch. The
    /// batching delay itself is not charged to the request's latency; lateness beyond it is
    #[arg(long, default_value_t = 1000.0)]
    pacer_window_us: f64,
    /// How requests are spaced: `even` (request i at i/rate) or `poisson` (exponential gaps of the same mean
    /// rate, from --seed)
    #[arg(long, default_value = "even")]
    arrivals: String,
    /// Allow a target that is not a loopback address
    #[arg(long)]
    allow_remote: bool,
    /// Connections being opened at once at the start
    #[arg(long, default_value_t = 256)]
    connect_concurrency: usize,
    /// Seed for the token choice (default: from the clock)
    #[arg(long)]
    seed: Option<u64>,
    /// Requests mixed into the schedule and counted apart (own statuses per line, latencies, errors; kept
    /// out of the main figures): one whole Authorization header value per line, e.g. `Bearer <token>`
    #[arg(long)]
    mix_authorization: Option<PathBuf>,
    /// Share of the schedule's slots that send a --mix-authorization line instead (default 0.1)
    #[arg(long)]
    mix_fraction: Option<f64>,
}

fn fatal(msg: &str) -> ExitCode {
    eprintln!("openloop: {msg}");
    ExitCode::from(2)
}

fn config(cli: Cli) -> Result<Config, String> {
    if !(cli.rate.is_finite() && cli.rate > 0.0) {
        return Err(format!("--rate {} must be a positive number of requests per second", cli.rate));
    }
    if !(cli.duration.is_finite() && cli.duration > 0.0 && cli.duration < 1e7) {
        return Err(format!("--duration {} must be a positive number of seconds", cli.duration));
    }
    if !(cli.timeout.is_finite() && cli.timeout > 0.0 && cli.timeout < 1e6) {
        return Err(format!("--timeout {} must be a positive number of seconds", cli.timeout));
    }
    if cli.connections == 0 {
        return Err("--connections must be at least 1".into());
    }
    if cli.threads == 0 || cli.threads > 256 {
        return Err("--threads must be between 1 and 256".into());
    }
    let report_interval_ns = match cli.report_interval {
        Some(s) if s.is_finite() && s >= 0.001 => Some((s * 1e9) as u64),
        Some(s) => return Err(format!("--report-interval {s} must be at least 0.001 seconds")),
        None => None,
    };
    if !(cli.max_pacer_lag_ms.is_finite() && cli.max_pacer_lag_ms >= 0.0) {
        return Err("--max-pacer-lag-ms must be a number of milliseconds".into());
    }
    if !(cli.pacer_window_us.is_finite() && cli.pacer_window_us >= 0.0 && cli.pacer_window_us <= 100_000.0) {
        return Err("--pacer-window-us must be between 0 and 100000".into());
    }
    let target = parse_url(&cli.url, cli.allow_remote)?;
    let tokens = match &cli.tokens {
        Some(p) => load_tokens(p)?,
        None => Vec::new(),
    };
    let requests = Requests::build(&target, &tokens);
    let mix = match (&cli.mix_authorization, cli.mix_fraction) {
        (None, None) => None,
        (None, Some(_)) => return Err("--mix-fraction needs --mix-authorization FILE".into()),
        (Some(path), fraction) => {
            let fraction = fraction.unwrap_or(0.1);
            if !(fraction.is_finite() && (0.0..=1.0).contains(&fraction)) {
                return Err(format!("--mix-fraction {fraction} must be between 0 and 1"));
            }
            let lines = load_tokens(path).map_err(|e| e.replace("--tokens", "--mix-authorization"))?;
            Some(Mix { requests: Requests::with_authorization(&target, &lines, ""), fraction })
        }
    };
    let seed = cli.seed.unwrap_or_else(|| openloop::clock::mono_ns() ^ (std::process::id() as u64) << 32);
    let arrivals = openloop::schedule::Arrivals::parse(&cli.arrivals)
        .ok_or_else(|| format!("--arrivals {} must be even or poisson", cli.arrivals))?;
    Ok(Config {
        url: cli.url,
        target,
        requests,
        tokens: tokens.len(),
        rate: cli.rate,
        duration_ns: (cli.duration * 1e9).round() as u64,
        connections: cli.connections,
        threads: cli.threads,
        timeout_ns: (cli.timeout * 1e9).round() as u64,
        no_sends_after_end: cli.no_sends_after_end,
        idle_connections: cli.idle_connections,
        report_interval_ns,
        start_at_ns: cli.start_at_monotonic_ns,
        max_pacer_lag_ms: cli.max_pacer_lag_ms,
        pacer_window_ns: (cli.pacer_window_us * 1000.0).round() as u64,
        arrivals,
        connect_concurrency: cli.connect_concurrency.max(1),
        seed,
        mix,
    })
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            // --help / --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments").trim_start_matches("error: ");
            return fatal(&format!("{first} (see openloop --help)"));
        }
    };
    let cfg = match config(cli) {
        Ok(c) => c,
        Err(e) => return fatal(&e),
    };
    match openloop::run::run(cfg) {
        Ok(result) => {
            println!("{result}");
            ExitCode::SUCCESS
        }
        Err(e) => fatal(&e),
    }
}
