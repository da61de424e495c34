//! Per-thread counters and histograms, merged at the end; percentile summaries and HdrHistogram export.

use base64::Engine;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

/// Largest value a histogram holds: one hour in microseconds (larger values are clamped to it).
pub const HIST_MAX_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds, 3 significant digits.
pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, 3).expect("valid histogram bounds")
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Errors {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
}

#[derive(Debug, Clone)]
pub struct Stats {
    /// Response time from the intended send time (answered and timed-out requests).
    pub latency: Histogram<u64>,
    /// Actual send time minus intended time.
    pub send_lag: Histogram<u64>,
    /// Pacer release time minus intended time.
    pub pacer_lag: Histogram<u64>,
    /// Answers by status code (index = code, 0..=999).
    pub statuses: Vec<u64>,
    pub completed: u64,
    pub errors: Errors,
    /// TCP connections opened for the load (initial and reconnects; not the idle ones).
    pub connections_opened: u64,
    /// Requests sent again on a new connection because a reused one was closed before any answer byte.
    pub retries: u64,
    /// Slots still unanswered when the run ended (also counted in errors.timeout).
    pub unfinished: u64,
    /// Slots dropped unsent at the schedule's end (--no-sends-after-end; also counted in errors.timeout).
    pub unsent: u64,
    pub idle_connect_errors: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            latency: new_hist(),
            send_lag: new_hist(),
            pacer_lag: new_hist(),
            statuses: vec![0; 1000],
            completed: 0,
            errors: Errors::default(),
            connections_opened: 0,
            retries: 0,
            unfinished: 0,
            unsent: 0,
            idle_connect_errors: 0,
        }
    }
}

impl Stats {
    pub fn merge(&mut self, o: &Stats) {
        self.latency.add(&o.latency).expect("same bounds");
        self.send_lag.add(&o.send_lag).expect("same bounds");
        self.pacer_lag.add(&o.pacer_lag).expect("same bounds");
        for (a, b) in self.statuses.iter_mut().zip(&o.statuses) {
            *a += b;
        }
        self.completed += o.completed;
        self.errors.connect += o.errors.connect;
        self.errors.read += o.errors.read;
        self.errors.write += o.errors.write;
        self.errors.timeout += o.errors.timeout;
        self.connections_opened += o.connections_opened;
        self.retries += o.retries;
        self.unfinished += o.unfinished;
        self.unsent += o.unsent;
        self.idle_connect_errors += o.idle_connect_errors;
    }

    pub fn statuses_json(&self) -> Value {
        let mut m = Map::new();
        for (code, &n) in self.statuses.iter().enumerate() {
            if n > 0 {
                m.insert(code.to_string(), json!(n));
            }
        }
        Value::Object(m)
    }
}

/// The mixed-in requests (--mix-authorization), kept apart from the main figures: their own latency
/// histogram, statuses per mix line, completions and errors.
#[derive(Debug, Clone)]
pub struct MixStats {
    pub latency: Histogram<u64>,
    /// Answers by mix line, then by status code.
    pub by_line: Vec<BTreeMap<u16, u64>>,
    pub completed: u64,
    pub errors: Errors,
    /// Mix slots still unanswered when the run ended (also counted in errors.timeout).
    pub unfinished: u64,
}

impl MixStats {
    pub fn new(lines: usize) -> MixStats {
        MixStats { latency: new_hist(), by_line: vec![BTreeMap::new(); lines], completed: 0, errors: Errors::default(), unfinished: 0 }
    }

    pub fn merge(&mut self, o: &MixStats) {
        self.latency.add(&o.latency).expect("same bounds");
        for (a, b) in self.by_line.iter_mut().zip(&o.by_line) {
            for (code, n) in b {
                *a.entry(*code).or_insert(0) += n;
            }
        }
        self.completed += o.completed;
        self.errors.connect += o.errors.connect;
        self.errors.read += o.errors.read;
        self.errors.write += o.errors.write;
        self.errors.timeout += o.errors.timeout;
        self.unfinished += o.unfinished;
    }

    pub fn to_json(&self, fraction: f64) -> Value {
        let statuses_of = |m: &BTreeMap<u16, u64>| {
            Value::Object(m.iter().map(|(c, n)| (c.to_string(), json!(n))).collect::<Map<String, Value>>())
        };
        let mut all: BTreeMap<u16, u64> = BTreeMap::new();
        for line in &self.by_line {
            for (code, n) in line {
                *all.entry(*code).or_insert(0) += n;
            }
        }
        json!({
            "fraction": fraction,
            "lines": self.by_line.len(),
            "completed": self.completed,
            "statuses": statuses_of(&all),
            "statuses_by_line": self.by_line.iter().map(statuses_of).collect::<Vec<_>>(),
            "errors": {
                "connect": self.errors.connect,
                "read": self.errors.read,
                "write": self.errors.write,
                "timeout": self.errors.timeout,
            },
            "unfinished_at_end": self.unfinished,
            "latency_us": summary(&self.latency),
            "latency_hdr": encode(&self.latency),
        })
    }
}

pub const PERCENTILES: [(&str, f64); 9] = [
    ("p10", 10.0),
    ("p25", 25.0),
    ("p50", 50.0),
    ("p75", 75.0),
    ("p90", 90.0),
    ("p99", 99.0),
    ("p99.9", 99.9),
    ("p99.99", 99.99),
    ("p99.999", 99.999),
];

/// {"count", "min", "mean", "p10".."p99.999", "max"} in microseconds.
pub fn summary(h: &Histogram<u64>) -> Value {
    let mut m = Map::new();
    let empty = h.is_empty();
    m.insert("count".into(), json!(h.len()));
    m.insert("min".into(), json!(if empty { 0 } else { h.min() }));
    m.insert("mean".into(), json!(if empty { 0.0 } else { (h.mean() * 10.0).round() / 10.0 }));
    for (name, p) in PERCENTILES {
        m.insert(name.into(), json!(if empty { 0 } else { h.value_at_percentile(p) }));
    }
    m.insert("max".into(), json!(if empty { 0 } else { h.max() }));
    Value::Object(m)
}

/// Base64 of the HdrHistogram V2 + DEFLATE encoding (what Python's `HdrHistogram.decode` reads).
pub fn encode(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut buf).expect("serialize histogram");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn summary_and_round_trip() {
        let mut h = new_hist();
        for v in 1..=1000u64 {
            h.record(v).unwrap();
        }
        h.saturating_record(u64::MAX);
        let s = summary(&h);
        assert_eq!(s["count"], 1001);
        assert_eq!(s["min"], 1);
        assert_eq!(s["p50"], 501);
        assert!(s["max"].as_u64().unwrap() >= HIST_MAX_US);
        let bytes = base64::engine::general_purpose::STANDARD.decode(encode(&h)).unwrap();
        let back: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
        assert_eq!(back, h);
        let e = summary(&new_hist());
        assert_eq!(e["p99"], 0);
        assert_eq!(e["mean"], 0.0);
    }
}
