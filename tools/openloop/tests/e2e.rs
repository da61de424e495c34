//! End-to-end runs of the real binary against small HTTP servers started inside the test, all on
//! 127.0.0.1 (no mocks): statuses, body draining, keep-alive reuse, reconnects, timeouts, the stall
//! (coordinated-omission) test, signals and fatal errors.

use std::collections::HashSet;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use openloop::clock::mono_ns;
use openloop::schedule::Schedule;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How the test server behaves.
#[derive(Default)]
struct Behaviour {
    /// Close the connection (with `Connection: close`) after this many requests on it.
    close_every: Option<u64>,
    /// Answer nothing between these CLOCK_MONOTONIC times: requests arriving then wait for the end.
    freeze: Option<(u64, u64)>,
    /// Size of the 200 body.
    body_len: usize,
}

#[derive(Default)]
struct Seen {
    requests: AtomicU64,
    connections: AtomicU64,
    tokens: Mutex<HashSet<String>>,
    bad_requests: AtomicU64,
}

struct Server {
    addr: SocketAddr,
    seen: Arc<Seen>,
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

fn server_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

async fn handle(
    req: Request<Incoming>,
    b: Arc<Behaviour>,
    seen: Arc<Seen>,
    on_conn: Arc<AtomicU64>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    seen.requests.fetch_add(1, SeqCst);
    let n_on_conn = on_conn.fetch_add(1, SeqCst) + 1;
    if let Some((from, to)) = b.freeze {
        let now = mono_ns();
        if now >= from && now < to {
            tokio::time::sleep(Duration::from_nanos(to - now)).await;
        }
    }
    let token = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(String::from);
    if req.method() != hyper::Method::GET || req.uri().path() != "/me" || req.headers().get("host").is_none() {
        seen.bad_requests.fetch_add(1, SeqCst);
    }
    let (status, body) = match &token {
        Some(t) if t.starts_with("ok-") => (200, Bytes::from(vec![b'x'; b.body_len])),
        Some(t) if t.starts_with("nf-") => (404, Bytes::from_static(b"{\"error\":\"no such user\"}")),
        _ => (401, Bytes::new()),
    };
    if let Some(t) = token {
        seen.tokens.lock().unwrap().insert(t);
    }
    let mut resp = Response::builder().status(status);
    if b.close_every.is_some_and(|n| n_on_conn % n == 0) {
        resp = resp.header("connection", "close");
    }
    Ok(resp.body(Full::new(body)).unwrap())
}

fn hyper_server(b: Behaviour) -> Server {
    let rt = server_runtime();
    let b = Arc::new(b);
    let seen = Arc::new(Seen::default());
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let s2 = seen.clone();
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            s2.connections.fetch_add(1, SeqCst);
            let (b, seen) = (b.clone(), s2.clone());
            tokio::spawn(async move {
                let on_conn = Arc::new(AtomicU64::new(0));
                let svc = service_fn(move |req| handle(req, b.clone(), seen.clone(), on_conn.clone()));
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
    Server { addr, seen, rt: Some(rt) }
}

/// A hand-written server: chunked answers (several chunks and a trailer), and after `per_conn` answers
/// it closes the socket without saying so (as a server's idle timeout can). `answer: false` reads
/// requests and never answers.
fn raw_server(per_conn: usize, answer: bool) -> Server {
    let rt = server_runtime();
    let seen = Arc::new(Seen::default());
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let s2 = seen.clone();
    rt.spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { continue };
            s2.connections.fetch_add(1, SeqCst);
            let seen = s2.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let mut answered = 0;
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        seen.requests.fetch_add(1, SeqCst);
                        if !answer {
                            continue;
                        }
                        let resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                                     4\r\nWiki\r\n6;name=v\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\n";
                        if stream.write_all(resp).await.is_err() {
                            return;
                        }
                        answered += 1;
                        if answered == per_conn {
                            return; // dropped: closed without warning
                        }
                    }
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    Server { addr, seen, rt: Some(rt) }
}

fn tokens_file(name: &str, tokens: &[String]) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("openloop-test-{}-{name}.txt", std::process::id()));
    let mut f = std::fs::File::create(&p).unwrap();
    for t in tokens {
        writeln!(f, "{t}").unwrap();
    }
    p
}

fn openloop(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_openloop")).args(args).output().expect("run openloop")
}

fn result_of(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "openloop failed: {:?}\nstderr: {stderr}", out.status);
    let last = stdout.lines().last().unwrap_or_else(|| panic!("no output; stderr: {stderr}"));
    assert!(last.starts_with("{\"type\":\"result\""), "last line: {last}");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("{\"type\":\"result\"")).count(), 1);
    serde_json::from_str(last).unwrap()
}

fn args(addr: SocketAddr, extra: &[&str]) -> Vec<String> {
    let mut v = vec!["--url".to_string(), format!("http://{addr}/me")];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn decode(b64: &str) -> Histogram<u64> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
    Deserializer::new().deserialize(&mut &bytes[..]).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[test]
fn counts_statuses_drains_bodies_and_reuses_connections() {
    let srv = hyper_server(Behaviour { body_len: 20_000, ..Default::default() });
    let mut tokens: Vec<String> = (0..40).map(|i| format!("ok-{i:03}-{}", "a".repeat(200))).collect();
    tokens.extend((0..10).map(|i| format!("nf-{i:03}")));
    let tf = tokens_file("statuses", &tokens);
    let out = openloop(&args(
        srv.addr,
        &["--rate", "1000", "--duration", "1", "--connections", "8", "--tokens", tf.to_str().unwrap(), "--seed", "7"],
    ));
    let r = result_of(&out);
    assert_eq!(u(&r["scheduled"]), 1000);
    assert_eq!(u(&r["completed"]), 1000);
    assert_eq!(r["errors"], serde_json::json!({"connect": 0, "read": 0, "write": 0, "timeout": 0}));
    let ok = u(&r["statuses"]["200"]);
    let nf = u(&r["statuses"]["404"]);
    assert_eq!(ok + nf, 1000, "{}", r["statuses"]);
    assert!((700..=900).contains(&ok), "tokens are drawn uniformly: 200s {ok}");
    // keep-alive: the 20 kB bodies were drained, so every request reused one of the 8 connections
    assert_eq!(u(&r["connections_opened"]), 8);
    assert_eq!(srv.seen.connections.load(SeqCst), 8);
    assert_eq!(srv.seen.requests.load(SeqCst), 1000);
    assert_eq!(srv.seen.bad_requests.load(SeqCst), 0);
    let seen = srv.seen.tokens.lock().unwrap();
    assert!(seen.iter().all(|t| tokens.contains(t)));
    assert!(seen.len() >= 45, "only {} distinct tokens", seen.len());
    // histograms: one latency per answer, decodable
    let h = decode(r["latency_hdr"].as_str().unwrap());
    assert_eq!(h.len(), 1000);
    assert_eq!(h.value_at_percentile(99.0), u(&r["latency_us"]["p99"]));
    assert_eq!(decode(r["send_lag_hdr"].as_str().unwrap()).len(), 1000);
    assert_eq!(u(&r["pacer_lag_us"]["count"]), 1000);
    assert!(u(&r["latency_us"]["p50"]) < 50_000);
    assert!((r["achieved_rps"].as_f64().unwrap() - 1000.0).abs() < 1.0);
    assert_eq!(r["interrupted"], false);
    assert!(r["generator"].as_str().unwrap().starts_with("openloop "));
    assert!(r["cpu_user_s"].as_f64().unwrap() + r["cpu_system_s"].as_f64().unwrap() > 0.0);
    let _ = std::fs::remove_file(tf);
}

#[test]
fn reopens_connections_the_server_closes() {
    let srv = hyper_server(Behaviour { close_every: Some(10), body_len: 100, ..Default::default() });
    let tf = tokens_file("close", &["ok-1".to_string(), "ok-2".to_string()]);
    let out = openloop(&args(
        srv.addr,
        &["--rate", "2000", "--duration", "1", "--connections", "8", "--tokens", tf.to_str().unwrap()],
    ));
    let r = result_of(&out);
    assert_eq!(u(&r["completed"]), 2000);
    assert_eq!(u(&r["statuses"]["200"]), 2000);
    assert_eq!(r["errors"], serde_json::json!({"connect": 0, "read": 0, "write": 0, "timeout": 0}));
    // every 10th answer closes its connection: 200 closes, each reopened when next needed
    let opened = u(&r["connections_opened"]);
    assert!((200..=208).contains(&opened), "connections_opened {opened}");
    assert_eq!(srv.seen.connections.load(SeqCst), opened);
    let _ = std::fs::remove_file(tf);
}

#[test]
fn chunked_answers_and_silent_closes() {
    let srv = raw_server(5, true);
    let out = openloop(&args(srv.addr, &["--rate", "500", "--duration", "1", "--connections", "4"]));
    let r = result_of(&out);
    assert_eq!(u(&r["completed"]), 500);
    assert_eq!(u(&r["statuses"]["200"]), 500);
    assert_eq!(r["errors"], serde_json::json!({"connect": 0, "read": 0, "write": 0, "timeout": 0}));
    // a connection closed without notice is noticed when reused: the request goes again on a new one
    assert!(u(&r["retries"]) > 0);
    assert!(u(&r["connections_opened"]) >= 100);
    // the server read each request once: the ones sent on a dead connection never reached it
    assert_eq!(srv.seen.requests.load(SeqCst), 500);
}

#[test]
fn unanswered_requests_are_timeouts_with_their_latency() {
    let srv = raw_server(0, false);
    let out = openloop(&args(
        srv.addr,
        &["--rate", "100", "--duration", "1", "--connections", "4", "--timeout", "0.5"],
    ));
    let r = result_of(&out);
    assert_eq!(u(&r["scheduled"]), 100);
    assert_eq!(u(&r["completed"]), 0);
    assert_eq!(u(&r["errors"]["timeout"]), 100);
    // each is in the latency histogram with at least the timeout
    assert_eq!(u(&r["latency_us"]["count"]), 100);
    assert!(u(&r["latency_us"]["min"]) >= 490_000, "{}", r["latency_us"]);
    // timed-out connections were dropped and reopened
    assert!(u(&r["connections_opened"]) > 4);
}

/// THE STALL TEST: the server freezes for 1 s in the middle of a constant-rate run. In the open model
/// every request due during the freeze waits for its end, so its latency is freeze_end - intended (plus
/// service time); p99 and p99.9 follow from the schedule alone. A closed-loop generator (coordinated
/// omission) would report only the few requests that were in flight.
#[test]
fn stall_is_charged_to_every_request_due_during_it() {
    let rate = 3000.0;
    let duration_s = 4.5;
    let start = mono_ns() + 700_000_000;
    let freeze = (start + 1_500_000_000, start + 2_500_000_000);
    let srv = hyper_server(Behaviour { freeze: Some(freeze), body_len: 64, ..Default::default() });
    let tf = tokens_file("stall", &["ok-1".to_string()]);
    let out = openloop(&args(
        srv.addr,
        &[
            "--rate",
            "3000",
            "--duration",
            "4.5",
            "--connections",
            "64",
            "--tokens",
            tf.to_str().unwrap(),
            "--start-at-monotonic-ns",
            &start.to_string(),
        ],
    ));
    let r = result_of(&out);
    assert_eq!(u(&r["schedule_start_monotonic_ns"]), start);
    let sched = Schedule::new(start, rate, (duration_s * 1e9) as u64, 1);
    assert_eq!(u(&r["scheduled"]), sched.total);
    assert_eq!(u(&r["completed"]), sched.total);
    // the truth, from the schedule
    let mut truth: Vec<u64> = (0..sched.total)
        .map(|i| {
            let t = sched.intended(i);
            if t >= freeze.0 && t < freeze.1 {
                (freeze.1 - t) / 1000
            } else {
                0
            }
        })
        .collect();
    truth.sort_unstable();
    let pct = |p: f64| truth[((p / 100.0 * truth.len() as f64).ceil() as usize).min(truth.len()) - 1];
    for (name, p) in [("p99", 99.0), ("p99.9", 99.9)] {
        let want = pct(p) as f64;
        let got = u(&r["latency_us"][name]) as f64;
        assert!((got - want).abs() <= 0.15 * want, "{name}: openloop {got} us, open-model truth {want} us");
    }
    // about a third of the requests were due in the freeze: the median is untouched, p90 is not
    assert!(u(&r["latency_us"]["p50"]) < 20_000, "{}", r["latency_us"]);
    assert!(u(&r["latency_us"]["p90"]) > 300_000, "{}", r["latency_us"]);
    // the wait was for connections, not the pacer: send lag shows it, pacer lag does not
    assert!(u(&r["send_lag_us"]["p99"]) > 800_000);
    assert!(u(&r["pacer_lag_us"]["p99"]) < 20_000);
    assert!(u(&r["max_queued"]) > 2_000);
    assert_eq!(u(&r["max_in_flight"]), 64);
    let _ = std::fs::remove_file(tf);
}

/// --no-sends-after-end: a server frozen past the schedule's end gets only what was in flight at the end;
/// the generator's queue is dropped unsent (counted, charged as timeouts), never sent afterwards.
#[test]
fn no_sends_after_end_drops_the_generators_backlog() {
    let start = mono_ns() + 700_000_000;
    let freeze = (start, start + 2_000_000_000);
    let srv = hyper_server(Behaviour { freeze: Some(freeze), body_len: 16, ..Default::default() });
    let tf = tokens_file("unsent", &["ok-1".to_string()]);
    let out = openloop(&args(
        srv.addr,
        &[
            "--rate",
            "200",
            "--duration",
            "1",
            "--connections",
            "8",
            "--tokens",
            tf.to_str().unwrap(),
            "--start-at-monotonic-ns",
            &start.to_string(),
            "--no-sends-after-end",
        ],
    ));
    let r = result_of(&out);
    assert_eq!(u(&r["scheduled"]), 200);
    assert_eq!(u(&r["completed"]), 8, "{r}");
    assert_eq!(u(&r["unsent_at_end"]), 192);
    assert_eq!(u(&r["errors"]["timeout"]), 192);
    assert_eq!(u(&r["latency_us"]["count"]), 200);
    assert_eq!(srv.seen.requests.load(SeqCst), 8);
    let _ = std::fs::remove_file(tf);
}

#[test]
fn holds_idle_connections_and_reports_intervals() {
    let srv = hyper_server(Behaviour { body_len: 10, ..Default::default() });
    let tf = tokens_file("idle", &["ok-1".to_string()]);
    let out = openloop(&args(
        srv.addr,
        &[
            "--rate",
            "500",
            "--duration",
            "1",
            "--connections",
            "4",
            "--threads",
            "2",
            "--idle-connections",
            "300",
            "--report-interval",
            "0.25",
            "--tokens",
            tf.to_str().unwrap(),
        ],
    ));
    let r = result_of(&out);
    assert_eq!(u(&r["completed"]), 500);
    assert_eq!(u(&r["idle_connections_opened"]), 300);
    assert_eq!(u(&r["idle_connections_open_at_end"]), 300);
    assert_eq!(u(&r["connections_opened"]), 4);
    assert_eq!(srv.seen.connections.load(SeqCst), 304);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let intervals: Vec<Value> = stdout
        .lines()
        .filter(|l| l.starts_with("{\"type\":\"interval\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(intervals.len() >= 3, "{stdout}");
    assert_eq!(intervals[0]["t_s"], 0.25);
    assert!(intervals.iter().all(|i| u(&i["completed"]) > 50 && u(&i["p50_us"]) > 0));
    // after the run, the server sees the idle connections go away too
    drop(out);
    let _ = std::fs::remove_file(tf);
}

#[test]
fn mixed_requests_are_counted_and_timed_apart() {
    let srv = hyper_server(Behaviour { body_len: 10, ..Default::default() });
    let tf = tokens_file("mix-main", &["ok-1".to_string(), "ok-2".to_string()]);
    // whole Authorization values: an unknown user (404), a bad token and another scheme (401)
    let mf = tokens_file("mix-hostile", &["Bearer nf-unknown".into(), "Bearer garbage".into(), "Basic dXNlcjpwdw==".into()]);
    let out = openloop(&args(
        srv.addr,
        &[
            "--rate", "2000", "--duration", "1", "--connections", "8", "--tokens", tf.to_str().unwrap(),
            "--mix-authorization", mf.to_str().unwrap(), "--mix-fraction", "0.1", "--report-interval", "0.25",
        ],
    ));
    let r = result_of(&out);
    let mix = &r["mix"];
    assert_eq!(u(&r["scheduled"]), 2000);
    // every slot is on one side only; the main side saw only its own 200s
    assert_eq!(u(&r["completed"]) + u(&mix["completed"]), 2000);
    assert_eq!(r["statuses"], serde_json::json!({"200": u(&r["completed"])}));
    assert_eq!(u(&r["latency_us"]["count"]), u(&r["completed"]));
    let mixed = u(&mix["completed"]);
    assert!((140..=260).contains(&mixed), "{mixed} of 2000 mixed at 0.1");
    assert_eq!(u(&mix["latency_us"]["count"]), mixed);
    assert_eq!(decode(mix["latency_hdr"].as_str().unwrap()).len(), mixed);
    // per line: exactly what the server answers to that header value
    let by_line = mix["statuses_by_line"].as_array().unwrap();
    assert_eq!(by_line.len(), 3);
    assert_eq!(by_line[0].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["404"], "{by_line:?}");
    assert_eq!(by_line[1].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["401"], "{by_line:?}");
    assert_eq!(by_line[2].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["401"], "{by_line:?}");
    assert_eq!(u(&mix["statuses"]["401"]) + u(&mix["statuses"]["404"]), mixed);
    assert_eq!(mix["errors"], serde_json::json!({"connect": 0, "read": 0, "write": 0, "timeout": 0}));
    assert!(srv.seen.tokens.lock().unwrap().contains("nf-unknown"));
    // the interval lines carry the main requests only: no non-2xx, no errors
    let stdout = String::from_utf8_lossy(&out.stdout);
    let intervals: Vec<Value> =
        stdout.lines().filter(|l| l.starts_with("{\"type\":\"interval\"")).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(intervals.len() >= 3, "{stdout}");
    assert!(intervals.iter().all(|i| u(&i["non_2xx"]) == 0 && u(&i["errors"]) == 0), "{stdout}");
    // without a mix there is no mix object
    let plain = result_of(&openloop(&args(srv.addr, &["--rate", "100", "--duration", "0.2", "--tokens", tf.to_str().unwrap()])));
    assert!(plain["mix"].is_null());
    let _ = std::fs::remove_file(tf);
    let _ = std::fs::remove_file(mf);
}

#[test]
fn intervals_count_errors_when_they_happen() {
    let srv = raw_server(0, false);
    let out = openloop(&args(
        srv.addr,
        &["--rate", "200", "--duration", "1.5", "--connections", "4", "--timeout", "0.3", "--report-interval", "0.25"],
    ));
    let r = result_of(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let intervals: Vec<Value> =
        stdout.lines().filter(|l| l.starts_with("{\"type\":\"interval\"")).map(|l| serde_json::from_str(l).unwrap()).collect();
    // nothing is ever answered: the first interval ends before any timeout, later ones count them
    assert_eq!(u(&intervals[0]["errors"]), 0, "{stdout}");
    assert!(intervals.iter().all(|i| u(&i["completed"]) == 0), "{stdout}");
    let counted: u64 = intervals.iter().map(|i| u(&i["errors"])).sum();
    assert!(counted > 0 && counted <= u(&r["errors"]["timeout"]), "{counted} in intervals; {stdout}");
}

#[test]
fn sigint_stops_the_schedule_and_still_reports() {
    let srv = hyper_server(Behaviour { body_len: 10, ..Default::default() });
    let child = Command::new(env!("CARGO_BIN_EXE_openloop"))
        .args(args(srv.addr, &["--rate", "200", "--duration", "30", "--connections", "2"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let t0 = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(3));
    let r = result_of(&out);
    assert_eq!(r["interrupted"], true);
    let scheduled = u(&r["scheduled"]);
    assert!((60..200).contains(&scheduled), "scheduled {scheduled}");
    assert_eq!(u(&r["completed"]), scheduled);
    let d = r["duration_s"].as_f64().unwrap();
    assert!(d > 0.3 && d < 1.2, "duration_s {d}");
}

fn fatal(args: &[String]) -> String {
    let out = openloop(args);
    assert_eq!(out.status.code(), Some(2), "stdout {}", String::from_utf8_lossy(&out.stdout));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn fatal_errors_exit_2_with_one_line() {
    // nothing listens on this port
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = |url: String, extra: &[&str]| {
        let mut v = vec!["--url".to_string(), url, "--rate".into(), "10".into(), "--duration".into(), "1".into()];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let e = fatal(&base(format!("http://127.0.0.1:{port}/"), &[]));
    assert!(e.contains("cannot connect") && e.contains("start the server"), "{e}");
    let e = fatal(&base("http://192.0.2.1/".into(), &[]));
    assert!(e.contains("--allow-remote"), "{e}");
    let e = fatal(&base(format!("http://127.0.0.1:{port}/"), &["--tokens", "/nonexistent/tokens.txt"]));
    assert!(e.contains("token file"), "{e}");
    let e = fatal(&base(format!("http://127.0.0.1:{port}/"), &["--bogus"]));
    assert!(e.contains("--help"), "{e}");
    let e = fatal(&base(format!("http://127.0.0.1:{port}/"), &["--mix-fraction", "0.1"]));
    assert!(e.contains("--mix-authorization"), "{e}");
    let e = fatal(&["--url".into(), format!("http://127.0.0.1:{port}/"), "--rate".into(), "0".into(), "--duration".into(), "1".into()]);
    assert!(e.contains("--rate"), "{e}");
    let help = openloop(&["--help".to_string()]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("intended time"));
}
