//! What a run is asked to do: the target (parsed from --url, loopback only unless allowed), the
//! prebuilt requests (one per token), and the numbers.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::Path;

/// The target of a run, from an http:// URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    /// Path and query, as sent in the request line.
    pub path: String,
    /// Value of the Host header (host[:port] as written in the URL).
    pub host_header: String,
    pub addr: SocketAddr,
}

fn is_loopback_name(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<IpAddr>().map(|ip| ip.is_loopback()).unwrap_or(false)
}

/// Parse `http://host[:port][/path]`. Hosts other than 127.x.x.x, ::1 and localhost are refused unless
/// `allow_remote`.
pub fn parse_url(url: &str, allow_remote: bool) -> Result<Target, String> {
    let rest = match url.get(..7) {
        Some(s) if s.eq_ignore_ascii_case("http://") => &url[7..],
        _ if url.len() >= 8 && url[..8].eq_ignore_ascii_case("https://") => {
            return Err(format!("--url {url}: https is not supported, use an http:// URL"))
        }
        _ => return Err(format!("--url {url}: expected http://HOST[:PORT]/PATH")),
    };
    let rest = rest.split('#').next().unwrap_or("");
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_string()),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("--url {url}: expected http://HOST[:PORT]/PATH (no user info)"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let close = v6.find(']').ok_or_else(|| format!("--url {url}: unclosed [ in host"))?;
        let host = &v6[..close];
        let after = &v6[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(format!("--url {url}: bad text after ]")),
        };
        (host.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    let port: u16 = match port {
        Some(p) => p.parse().map_err(|_| format!("--url {url}: bad port {p:?}"))?,
        None => 80,
    };
    if host.is_empty() || port == 0 {
        return Err(format!("--url {url}: expected http://HOST[:PORT]/PATH"));
    }
    let loopback = is_loopback_name(&host);
    if !loopback && !allow_remote {
        return Err(format!(
            "--url {url}: {host} is not a loopback address (127.x.x.x, ::1, localhost); pass --allow-remote to load a remote host"
        ));
    }
    let addrs: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("--url {url}: cannot resolve {host}: {e}"))?
        .collect();
    let addr = addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| format!("--url {url}: {host} resolves to no address"))?;
    if loopback && !addr.ip().is_loopback() && !allow_remote {
        return Err(format!("--url {url}: {host} resolves to {}, not a loopback address; pass --allow-remote", addr.ip()));
    }
    Ok(Target { host, port, path, host_header: authority.to_string(), addr })
}

/// Read a token pool: one token per line, blank lines skipped, surrounding white space removed.
pub fn load_tokens(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read token file {}: {e}; create it or pass another --tokens", path.display()))?;
    let tokens: Vec<String> = text.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect();
    if tokens.is_empty() {
        return Err(format!("token file {} has no tokens (one per line expected)", path.display()));
    }
    Ok(tokens)
}

/// Every request the run can send, built once: `GET path` with `Authorization: Bearer <token>` for each
/// token (or one request without the header when there are no tokens), concatenated in one buffer.
pub struct Requests {
    data: Vec<u8>,
    spans: Vec<(usize, usize)>,
}

impl Requests {
    pub fn build(target: &Target, tokens: &[String]) -> Requests {
        Requests::with_authorization(target, tokens, "Bearer ")
    }

    /// One request per value, each with `Authorization: <prefix><value>` (or one request without the
    /// header when there are no values). `build` uses the prefix "Bearer "; the hostile mix uses "" (its
    /// lines are whole header values: other schemes, a scheme alone, a token without a scheme).
    pub fn with_authorization(target: &Target, values: &[String], prefix: &str) -> Requests {
        let head = format!("GET {} HTTP/1.1\r\nHost: {}\r\n", target.path, target.host_header);
        let mut data = Vec::with_capacity(values.len().max(1) * (head.len() + 40 + values.first().map_or(0, |t| t.len())));
        let mut spans = Vec::with_capacity(values.len().max(1));
        let mut push = |data: &mut Vec<u8>, value: Option<&str>| {
            let from = data.len();
            data.extend_from_slice(head.as_bytes());
            if let Some(v) = value {
                data.extend_from_slice(b"Authorization: ");
                data.extend_from_slice(prefix.as_bytes());
                data.extend_from_slice(v.as_bytes());
                data.extend_from_slice(b"\r\n");
            }
            data.extend_from_slice(b"\r\n");
            spans.push((from, data.len()));
        };
        if values.is_empty() {
            push(&mut data, None);
        }
        for v in values {
            push(&mut data, Some(v));
        }
        Requests { data, spans }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub fn get(&self, i: usize) -> &[u8] {
        let (a, b) = self.spans[i];
        &self.data[a..b]
    }
}

/// Requests mixed into the schedule and accounted apart (e.g. hostile tokens among valid ones): each slot
/// is a mix slot with probability `fraction`, decided from the slot itself (see `Mix::line_for`), so
/// every slot, answered or not, is counted on one side only.
pub struct Mix {
    pub requests: Requests,
    pub fraction: f64,
}

impl Mix {
    /// The mix line slot `intended` sends, or None for a slot of the main pool: a hash of the slot's
    /// intended time and the run's seed, uniform in [0, 1) against `fraction`, and a second hash for the
    /// line (uniform over the lines).
    pub fn line_for(&self, intended: u64, seed: u64) -> Option<usize> {
        let h = splitmix64(intended ^ seed);
        let u = (h >> 11) as f64 / (1u64 << 53) as f64;
        (u < self.fraction).then(|| (splitmix64(h) % self.requests.len() as u64) as usize)
    }
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Everything a run needs.
pub struct Config {
    pub url: String,
    pub target: Target,
    pub requests: Requests,
    pub tokens: usize,
    pub rate: f64,
    pub duration_ns: u64,
    pub connections: usize,
    pub threads: usize,
    pub timeout_ns: u64,
    /// --no-sends-after-end: the generator's queue at the schedule's end is dropped, not sent.
    pub no_sends_after_end: bool,
    pub idle_connections: usize,
    pub report_interval_ns: Option<u64>,
    pub start_at_ns: Option<u64>,
    pub max_pacer_lag_ms: f64,
    /// How far the pacer's timer may batch slots (see pacer::Pacer::new).
    pub pacer_window_ns: u64,
    /// How the slots are spaced: evenly, or as a Poisson process (schedule::Arrivals).
    pub arrivals: crate::schedule::Arrivals,
    pub connect_concurrency: usize,
    pub seed: u64,
    /// --mix-authorization / --mix-fraction: requests counted and timed apart from the main pool.
    pub mix: Option<Mix>,
}

/// Thread `k`'s share of `n` things split over `t` threads (the first n % t threads get one more).
pub fn share(n: usize, t: usize, k: usize) -> usize {
    n / t + usize::from(k < n % t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = parse_url("http://127.0.0.1:18091/users/me?x=1", false).unwrap();
        assert_eq!((t.port, t.path.as_str(), t.host_header.as_str()), (18091, "/users/me?x=1", "127.0.0.1:18091"));
        assert_eq!(t.addr, "127.0.0.1:18091".parse().unwrap());
        let t = parse_url("http://localhost:9", false).unwrap();
        assert_eq!(t.path, "/");
        assert!(t.addr.ip().is_loopback());
        let t = parse_url("HTTP://[::1]:7/a#frag", false).unwrap();
        assert_eq!((t.host.as_str(), t.port, t.path.as_str()), ("::1", 7, "/a"));
        let t = parse_url("http://127.1.2.3?q", false).unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/?q"));
        assert!(parse_url("http://10.0.0.1:80/", false).unwrap_err().contains("--allow-remote"));
        assert!(parse_url("http://example.com/", false).unwrap_err().contains("--allow-remote"));
        assert!(parse_url("https://127.0.0.1/", false).unwrap_err().contains("https"));
        assert!(parse_url("127.0.0.1:80/", false).is_err());
        assert!(parse_url("http://127.0.0.1:x/", false).is_err());
        assert!(parse_url("http://u@127.0.0.1/", false).is_err());
        // an address literal is fine with --allow-remote (no lookup needed)
        assert_eq!(parse_url("http://10.0.0.1:81/", true).unwrap().addr, "10.0.0.1:81".parse().unwrap());
    }

    #[test]
    fn requests_are_prebuilt() {
        let t = parse_url("http://127.0.0.1:18091/me", false).unwrap();
        let r = Requests::build(&t, &["a".into(), "bb".into()]);
        assert_eq!(r.len(), 2);
        assert_eq!(r.get(1), b"GET /me HTTP/1.1\r\nHost: 127.0.0.1:18091\r\nAuthorization: Bearer bb\r\n\r\n");
        let r = Requests::build(&t, &[]);
        assert_eq!(r.get(0), b"GET /me HTTP/1.1\r\nHost: 127.0.0.1:18091\r\n\r\n");
    }

    #[test]
    fn mix_slots_follow_the_fraction_and_cover_every_line() {
        let t = parse_url("http://127.0.0.1:18091/", false).unwrap();
        let lines: Vec<String> = (0..7).map(|i| format!("Basic x{i}")).collect();
        let mix = Mix { requests: Requests::with_authorization(&t, &lines, ""), fraction: 0.1 };
        assert_eq!(mix.requests.get(2), b"GET / HTTP/1.1\r\nHost: 127.0.0.1:18091\r\nAuthorization: Basic x2\r\n\r\n");
        let mut per_line = [0u32; 7];
        let n = 100_000u64;
        for i in 0..n {
            // slot times 100 µs apart, as at 10,000 req/s
            if let Some(line) = mix.line_for(1_000_000_000 + i * 100_000, 42) {
                per_line[line] += 1;
            }
        }
        let mixed: u32 = per_line.iter().sum();
        assert!((9_500..10_500).contains(&mixed), "{mixed} of {n} slots mixed at 0.1");
        assert!(per_line.iter().all(|&c| (1_100..1_800).contains(&c)), "{per_line:?}");
        // decided by the slot: the same slot always gets the same answer
        assert_eq!(mix.line_for(123_456_789, 42), mix.line_for(123_456_789, 42));
        let none = Mix { requests: Requests::with_authorization(&t, &lines, ""), fraction: 0.0 };
        assert!((0..1000u64).all(|i| none.line_for(i * 977, 1).is_none()));
    }

    #[test]
    fn shares_add_up() {
        for n in [0, 1, 5, 64, 5001] {
            for t in 1..4 {
                assert_eq!((0..t).map(|k| share(n, t, k)).sum::<usize>(), n);
            }
        }
    }
}
