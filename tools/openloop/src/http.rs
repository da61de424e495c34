//! The client side of HTTP/1.1 that openloop needs: parse a response head (httparse), work out how the
//! body is framed, and read and discard the body (Content-Length, chunked, or until close), so that the
//! connection is ready for the next request.

use std::io;

use tokio::io::{AsyncReadExt, Interest};
use tokio::net::TcpStream;

/// How the response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// The connection may carry another request after this response.
    pub keep_alive: bool,
    pub framing: Framing,
}

#[derive(Debug)]
pub enum RespError {
    /// The peer closed or reset the connection, or a socket error; `got_bytes` says whether any byte of
    /// this response had arrived (if none, the request can safely be sent again on a new connection).
    Io { err: io::Error, got_bytes: bool },
    /// Not a valid HTTP/1.x response.
    Parse(String),
}

fn has_token(value: &[u8], token: &str) -> bool {
    value.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Parse a response head at the start of `buf`: Ok(None) if incomplete, else its length and meaning.
pub fn parse_head(buf: &[u8]) -> Result<Option<(usize, Head)>, RespError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let n = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(RespError::Parse(format!("bad response head: {e}"))),
    };
    let status = resp.code.unwrap_or(0);
    let http11 = resp.version == Some(1);
    let mut keep_alive = http11;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut other_encoding = false;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).ok().and_then(|s| s.trim().parse::<u64>().ok());
            match v {
                Some(v) if length.is_none() || length == Some(v) => length = Some(v),
                _ => return Err(RespError::Parse("bad Content-Length".into())),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // chunked must be the last coding when present
            let last = h.value.rsplit(|&b| b == b',').next().unwrap_or(b"").trim_ascii();
            chunked = last.eq_ignore_ascii_case(b"chunked");
            other_encoding = !chunked;
        } else if h.name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, "close") {
                keep_alive = false;
            } else if has_token(h.value, "keep-alive") {
                keep_alive = true;
            }
        }
    }
    let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::None
    } else if chunked {
        Framing::Chunked
    } else if other_encoding {
        Framing::UntilClose
    } else if let Some(l) = length {
        Framing::Length(l)
    } else {
        Framing::UntilClose
    };
    if framing == Framing::UntilClose {
        keep_alive = false;
    }
    Ok(Some((n, Head { status, keep_alive, framing })))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    Size { digits: u32, in_ext: bool },
    SizeLf,
    Data,
    DataCr,
    DataLf,
    Trailer { line_len: usize },
    TrailerLf { empty: bool },
    Done,
}

/// Incremental decoder that skips a chunked body (the bytes are discarded, only the framing matters).
#[derive(Debug, Clone)]
pub struct ChunkedSkipper {
    state: ChunkState,
    size: u64,
}

impl Default for ChunkedSkipper {
    fn default() -> Self {
        ChunkedSkipper { state: ChunkState::Size { digits: 0, in_ext: false }, size: 0 }
    }
}

impl ChunkedSkipper {
    pub fn done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Consume body bytes from `data`; returns how many belonged to the body (fewer than `data.len()` only
    /// once the body is complete).
    pub fn feed(&mut self, data: &[u8]) -> Result<usize, RespError> {
        let bad = |what: &str| Err(RespError::Parse(format!("bad chunked body: {what}")));
        let mut i = 0;
        while i < data.len() {
            let b = data[i];
            match self.state {
                ChunkState::Done => return Ok(i),
                ChunkState::Data => {
                    let take = (data.len() - i).min(self.size.min(usize::MAX as u64) as usize);
                    i += take;
                    self.size -= take as u64;
                    if self.size == 0 {
                        self.state = ChunkState::DataCr;
                    }
                    continue;
                }
                ChunkState::Size { digits, in_ext } => {
                    if b == b'\r' || b == b'\n' {
                        if digits == 0 {
                            return bad("empty chunk size");
                        }
                        self.state = ChunkState::SizeLf;
                        if b == b'\n' {
                            self.after_size_line();
                        }
                    } else if in_ext {
                    } else if b == b';' {
                        self.state = ChunkState::Size { digits, in_ext: true };
                    } else if b == b' ' || b == b'\t' {
                    } else if let Some(d) = (b as char).to_digit(16) {
                        if digits >= 16 {
                            return bad("chunk size too large");
                        }
                        self.size = self.size * 16 + d as u64;
                        self.state = ChunkState::Size { digits: digits + 1, in_ext };
                    } else {
                        return bad("chunk size");
                    }
                }
                ChunkState::SizeLf => {
                    if b != b'\n' {
                        return bad("chunk size line");
                    }
                    self.after_size_line();
                }
                ChunkState::DataCr => match b {
                    b'\r' => self.state = ChunkState::DataLf,
                    b'\n' => self.state = ChunkState::Size { digits: 0, in_ext: false },
                    _ => return bad("missing CRLF after chunk"),
                },
                ChunkState::DataLf => {
                    if b != b'\n' {
                        return bad("missing LF after chunk");
                    }
                    self.state = ChunkState::Size { digits: 0, in_ext: false };
                }
                ChunkState::Trailer { line_len } => match b {
                    b'\r' => self.state = ChunkState::TrailerLf { empty: line_len == 0 },
                    b'\n' if line_len == 0 => self.state = ChunkState::Done,
                    b'\n' => self.state = ChunkState::Trailer { line_len: 0 },
                    _ => self.state = ChunkState::Trailer { line_len: line_len + 1 },
                },
                ChunkState::TrailerLf { empty } => {
                    if b != b'\n' {
                        return bad("trailer line");
                    }
                    self.state = if empty { ChunkState::Done } else { ChunkState::Trailer { line_len: 0 } };
                }
            }
            i += 1;
        }
        Ok(i)
    }

    fn after_size_line(&mut self) {
        self.state = if self.size == 0 { ChunkState::Trailer { line_len: 0 } } else { ChunkState::Data };
    }
}

/// A connection's receive buffer; bytes [start, end) are received and not yet consumed.
pub struct RecvBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

pub const RECV_BUF: usize = 8 * 1024;
const MAX_HEAD: usize = 1024 * 1024;

impl Default for RecvBuf {
    fn default() -> Self {
        RecvBuf { buf: vec![0; RECV_BUF], start: 0, end: 0 }
    }
}

impl RecvBuf {
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    pub fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Read more bytes from the socket after `end`; Ok(0) at end of stream. `wants_more_room`: make room
    /// (compact, then grow) when the buffer is full, for a head that does not fit yet.
    async fn fill(&mut self, stream: &mut TcpStream) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.buf.len() < MAX_HEAD {
                let n = self.buf.len() * 2;
                self.buf.resize(n, 0);
            } else {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "response head larger than 1 MiB"));
            }
        }
        let n = stream.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        Ok(n)
    }
}

fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed by peer")
}

/// Read one whole response (head and body, body discarded) from `stream`.
pub async fn read_response(stream: &mut TcpStream, rb: &mut RecvBuf) -> Result<Head, RespError> {
    let mut got_bytes = rb.pending() > 0;
    let io_err = |err: io::Error, got_bytes: bool| RespError::Io { err, got_bytes };
    // head (skipping interim 1xx responses)
    let head = loop {
        if rb.pending() > 0 {
            if let Some((n, head)) = parse_head(&rb.buf[rb.start..rb.end])? {
                rb.start += n;
                if (100..200).contains(&head.status) && head.status != 101 {
                    continue;
                }
                break head;
            }
        }
        match rb.fill(stream).await {
            Ok(0) => return Err(io_err(eof(), got_bytes)),
            Ok(_) => got_bytes = true,
            Err(e) => return Err(io_err(e, got_bytes)),
        }
    };
    // body
    let mut last_read_filled = false;
    match head.framing {
        Framing::None => {}
        Framing::Length(len) => {
            let mut left = len;
            let take = (rb.pending() as u64).min(left);
            rb.start += take as usize;
            left -= take;
            while left > 0 {
                rb.clear();
                let n = stream.read(&mut rb.buf[..]).await.map_err(|e| io_err(e, true))?;
                if n == 0 {
                    return Err(io_err(eof(), true));
                }
                last_read_filled = n == rb.buf.len();
                if (n as u64) <= left {
                    left -= n as u64;
                } else {
                    rb.start = left as usize;
                    rb.end = n;
                    left = 0;
                }
            }
        }
        Framing::Chunked => {
            let mut dec = ChunkedSkipper::default();
            loop {
                let used = dec.feed(&rb.buf[rb.start..rb.end])?;
                rb.start += used;
                if dec.done() {
                    break;
                }
                rb.clear();
                let n = stream.read(&mut rb.buf[..]).await.map_err(|e| io_err(e, true))?;
                if n == 0 {
                    return Err(io_err(eof(), true));
                }
                last_read_filled = n == rb.buf.len();
                rb.end = n;
            }
        }
        Framing::UntilClose => {
            rb.clear();
            loop {
                match stream.read(&mut rb.buf[..]).await {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => return Err(io_err(e, true)),
                }
            }
            return Ok(head);
        }
    }
    if rb.pending() == 0 {
        rb.clear();
        if !last_read_filled {
            // The last read returned less than it could hold, so the socket is (almost surely) drained. Telling
            // tokio saves the read that would fail with EAGAIN before the next response. Safe: if bytes did
            // arrive meanwhile, their epoll edge is still queued and sets readiness again.
            let _ = stream.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
        }
    }
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(s: &str) -> Head {
        parse_head(s.as_bytes()).unwrap().unwrap().1
    }

    #[test]
    fn heads() {
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n");
        assert_eq!(h, Head { status: 200, keep_alive: true, framing: Framing::Length(12) });
        let h = head("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nConnection: close\r\n\r\n");
        assert_eq!(h, Head { status: 404, keep_alive: false, framing: Framing::Length(0) });
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
        assert_eq!(h.framing, Framing::Chunked);
        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(h.keep_alive);
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(h, Head { status: 200, keep_alive: false, framing: Framing::UntilClose });
        let h = head("HTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!(h, Head { status: 204, keep_alive: true, framing: Framing::None });
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap().is_none());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(parse_head(b"garbage\r\n\r\n").is_err());
    }

    fn skip_all(body: &[u8], piece: usize) -> (usize, bool) {
        let mut d = ChunkedSkipper::default();
        let mut used = 0;
        for part in body.chunks(piece) {
            let n = d.feed(part).unwrap();
            used += n;
            if d.done() {
                break;
            }
            assert_eq!(n, part.len());
        }
        (used, d.done())
    }

    #[test]
    fn chunked_bodies_in_any_pieces() {
        let body = b"5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        let end = body.len() - 4;
        for piece in [1, 2, 3, 7, 100] {
            assert_eq!(skip_all(body, piece), (end, true), "piece {piece}");
        }
        let simple = b"0\r\n\r\n";
        assert_eq!(skip_all(simple, 1), (5, true));
        let bare_lf = b"3\nabc\n0\n\n";
        assert_eq!(skip_all(bare_lf, 1), (bare_lf.len(), true));
        let mut d = ChunkedSkipper::default();
        assert_eq!(d.feed(b"5\r\nhel").unwrap(), 6);
        assert!(!d.done());
        assert!(ChunkedSkipper::default().feed(b"zz\r\n").is_err());
        assert!(ChunkedSkipper::default().feed(b"1\r\nab\r\n").is_err());
    }
}
