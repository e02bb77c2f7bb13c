//! A request's head, read before hyper sees the connection: bounded in
//! size, in time, and in the memory that all slow heads hold at once.
//!
//! hyper reads a head into a buffer of its own that grows to its
//! `max_buf_size` and is kept for the connection's life, and a limit it
//! checks after each read, so a head could overshoot it by a read. Here a
//! head is read into a buffer that exists only while the head arrives, and
//! never past [`HeadLimits::max_bytes`]; hyper is handed the whole head
//! (and whatever came with it) and parses it from memory.
//!
//! A head that arrives in one read, as an ordinary client's does, holds
//! nothing while it waits. One that is still incomplete when the socket
//! runs dry (a slow client, or slowloris) must first take its buffer's
//! size from a budget shared by the whole daemon; when the budget is spent
//! the connection is answered `overloaded` and closed, so slow heads
//! cannot grow the daemon past the budget however many there are.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tokio::time::Instant;

/// The first read's room: an ordinary head (and a small body with it)
/// fits.
pub(super) const FIRST_READ: usize = 4096;

/// Less room than this is grown before a read.
const MIN_READ: usize = 512;

/// The budget is counted in units of this many bytes.
const UNIT: usize = 1024;

/// hyper's default limit on a head's headers: a head with more is hyper's
/// to refuse.
pub const MAX_HEADERS: usize = 100;

/// Limits on heads.
#[derive(Debug)]
pub struct HeadLimits {
    /// The most bytes a head may have (request line, headers, blank line).
    pub max_bytes: usize,
    /// What the heads still being read may hold at once, in [`UNIT`]s.
    budget: Arc<Semaphore>,
}

impl HeadLimits {
    pub fn new(max_bytes: usize, budget_bytes: usize) -> HeadLimits {
        HeadLimits {
            max_bytes,
            budget: Arc::new(Semaphore::new(budget_bytes.div_ceil(UNIT))),
        }
    }
}

/// Why no head was read.
#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    /// The client closed (or reset) the connection before a whole head.
    Closed,
    /// The head was not complete by its deadline.
    Overdue,
    /// The head is larger than the limit.
    TooLarge,
    /// Waiting for the rest would take memory the budget does not have.
    OverBudget,
}

/// Reads until `buf` holds a whole head (and perhaps more), or a head that
/// hyper's parser already refuses, from `stream`, by `deadline`. `buf` may
/// already hold bytes (pipelined after the last request). Empty lines
/// before the request line are dropped, as hyper would skip them.
///
/// A head refused before its end is hyper's to answer at once (400, or
/// 431 for too many headers): waiting for a blank line that changes
/// nothing would hold, for example, HTTP/0.9's `GET /` (a request line
/// without a version) until its deadline and then close it unanswered.
pub async fn read_head(
    stream: &TcpStream,
    buf: &mut BytesMut,
    limits: &HeadLimits,
    deadline: Instant,
) -> Result<(), HeadError> {
    let mut held: Option<OwnedSemaphorePermit> = None;
    let mut scanned = 0;
    loop {
        skip_empty_lines(buf);
        scanned = scanned.min(buf.len());
        if let Some(end) = head_end(buf, scanned) {
            return if end > limits.max_bytes {
                Err(HeadError::TooLarge)
            } else {
                Ok(())
            };
        }
        if refused(buf) {
            return Ok(());
        }
        // The last three bytes may start a terminator the next read ends.
        scanned = buf.len().saturating_sub(3);
        if buf.len() >= limits.max_bytes {
            return Err(HeadError::TooLarge);
        }
        // Into the room the buffer has, unless that is small; never past
        // the limit.
        let len = buf.len();
        let spare = buf.capacity() - len;
        let room = if spare >= MIN_READ { spare } else { FIRST_READ }.min(limits.max_bytes - len);
        buf.reserve(room);
        // Into the spare capacity as it is: zeroing it first cost a
        // memset of the whole room on every request.
        match stream.try_read_buf(&mut (&mut *buf).limit(room)) {
            Ok(0) => return Err(HeadError::Closed),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return Err(HeadError::Closed),
        }
        // Nothing more to read now: an incomplete head is about to wait,
        // holding its buffer. It takes the buffer's size from the budget
        // first (more, if the buffer grew since).
        hold(limits, buf.capacity(), &mut held)?;
        match tokio::time::timeout_at(deadline, stream.readable()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(HeadError::Closed),
            Err(_) => return Err(HeadError::Overdue),
        }
    }
}

/// Makes `held` cover `bytes`, or fails without waiting.
fn hold(
    limits: &HeadLimits,
    bytes: usize,
    held: &mut Option<OwnedSemaphorePermit>,
) -> Result<(), HeadError> {
    let want = u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX);
    let have = held.as_ref().map_or(0, |p| p.num_permits());
    let Some(more) = want.checked_sub(u32::try_from(have).unwrap_or(u32::MAX)) else {
        return Ok(());
    };
    if more == 0 {
        return Ok(());
    }
    match limits.budget.clone().try_acquire_many_owned(more) {
        Ok(p) => {
            match held {
                Some(h) => h.merge(p),
                None => *held = Some(p),
            }
            Ok(())
        }
        Err(TryAcquireError::NoPermits | TryAcquireError::Closed) => Err(HeadError::OverBudget),
    }
}

/// Whether httparse (hyper's parser, with hyper's limit of headers)
/// refuses the head begun in `buf` whatever follows.
fn refused(buf: &[u8]) -> bool {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    httparse::Request::new(&mut headers).parse(buf).is_err()
}

fn skip_empty_lines(buf: &mut BytesMut) {
    let n = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    if n > 0 {
        let _ = buf.split_to(n);
    }
}

/// Where the head at the start of `buf` ends (just past its blank line), if
/// it is whole, as [`read_head`] finds it.
pub fn head_len(buf: &[u8]) -> Option<usize> {
    head_end(buf, 0)
}

/// Where the head ends (just past its blank line), looking from `from`:
/// lines end in CRLF or, as httparse also takes, a bare LF.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(p) = memchr(b'\n', &buf[i..]) {
        let nl = i + p;
        match buf.get(nl + 1) {
            Some(b'\n') => return Some(nl + 2),
            Some(b'\r') if buf.get(nl + 2) == Some(&b'\n') => return Some(nl + 3),
            _ => {}
        }
        i = nl + 1;
    }
    None
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    #[test]
    fn a_head_ends_at_its_blank_line_whatever_the_line_endings() {
        assert_eq!(
            head_end(b"GET / HTTP/1.1\r\nhost: x\r\n\r\nbody", 0),
            Some(27)
        );
        assert_eq!(head_end(b"GET / HTTP/1.1\nhost: x\n\nbody", 0), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nhost: x\r\n", 0), None);
        // A terminator split across reads is found from where the last
        // scan left three bytes back.
        let whole = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";
        assert_eq!(head_end(whole, whole.len() - 4 - 3), Some(whole.len()));
    }

    #[test]
    fn empty_lines_before_the_request_line_are_dropped() {
        let mut b = BytesMut::from(&b"\r\n\r\nGET /"[..]);
        skip_empty_lines(&mut b);
        assert_eq!(&b[..], b"GET /");
    }

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let c = TcpStream::connect(addr).await.expect("connect");
        let (s, _) = l.accept().await.expect("accept");
        (c, s)
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[tokio::test]
    async fn a_whole_head_in_one_read_takes_nothing_from_the_budget() {
        let limits = HeadLimits::new(16 << 10, 0);
        let (mut c, s) = pair().await;
        c.write_all(b"GET /healthz HTTP/1.1\r\nhost: t\r\n\r\n")
            .await
            .expect("write");
        s.readable().await.expect("readable");
        let mut buf = BytesMut::new();
        read_head(&s, &mut buf, &limits, soon())
            .await
            .expect("a head");
        assert!(buf.starts_with(b"GET /healthz"));
    }

    #[tokio::test]
    async fn a_slow_head_holds_budget_until_it_is_whole_and_one_too_many_is_refused() {
        let limits = Arc::new(HeadLimits::new(16 << 10, 2 * FIRST_READ));
        let (mut c1, s1) = pair().await;
        let (mut c2, s2) = pair().await;
        let (mut c3, s3) = pair().await;
        for c in [&mut c1, &mut c2, &mut c3] {
            c.write_all(b"GET / HTTP/1.1\r\n").await.expect("write");
        }
        let l1 = limits.clone();
        let first = tokio::spawn(async move {
            let mut buf = BytesMut::new();
            read_head(&s1, &mut buf, &l1, soon()).await.map(|()| buf)
        });
        let l2 = limits.clone();
        let second = tokio::spawn(async move {
            let mut buf = BytesMut::new();
            read_head(&s2, &mut buf, &l2, soon()).await
        });
        // Both wait, each holding a first read's room: the budget is spent.
        while limits.budget.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        let mut buf = BytesMut::new();
        assert_eq!(
            read_head(&s3, &mut buf, &limits, soon()).await,
            Err(HeadError::OverBudget)
        );
        drop(c3);
        // The first finishes its head: its share comes back.
        c1.write_all(b"host: t\r\n\r\n").await.expect("write");
        let buf = first.await.expect("join").expect("a head");
        assert!(buf.ends_with(b"\r\n\r\n"));
        assert_eq!(
            limits.budget.available_permits(),
            FIRST_READ / UNIT,
            "the finished head's share is back"
        );
        drop(c2);
        assert_eq!(second.await.expect("join"), Err(HeadError::Closed));
        assert_eq!(limits.budget.available_permits(), 2 * FIRST_READ / UNIT);
    }

    #[tokio::test]
    async fn a_head_past_the_limit_is_too_large_and_reads_no_further() {
        let limits = HeadLimits::new(1024, 1 << 20);
        let (mut c, s) = pair().await;
        let big = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(4000));
        c.write_all(big.as_bytes()).await.expect("write");
        s.readable().await.expect("readable");
        let mut buf = BytesMut::new();
        assert_eq!(
            read_head(&s, &mut buf, &limits, soon()).await,
            Err(HeadError::TooLarge)
        );
        assert!(buf.len() <= 1024, "read {} bytes", buf.len());
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_that_stops_coming_is_overdue() {
        let limits = HeadLimits::new(16 << 10, 1 << 20);
        let (mut c, s) = pair().await;
        c.write_all(b"GET / HTTP/1.1\r\n").await.expect("write");
        let mut buf = BytesMut::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            read_head(&s, &mut buf, &limits, deadline).await,
            Err(HeadError::Overdue)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_already_refused_is_handed_on_at_once() {
        let limits = HeadLimits::new(16 << 10, 1 << 20);
        // HTTP/0.9's request line has no version; nor, once more than
        // hyper's limit of headers has come, does waiting change anything.
        let many: String = (0..=MAX_HEADERS).map(|i| format!("x-{i}: y\r\n")).collect();
        let heads = [
            "GET /\r\n".to_owned(),
            "GET / FOO/1.1\r\n".to_owned(),
            format!("GET / HTTP/1.1\r\n{many}"),
        ];
        for head in heads {
            let (mut c, s) = pair().await;
            c.write_all(head.as_bytes()).await.expect("write");
            let mut buf = BytesMut::new();
            let deadline = Instant::now() + Duration::from_secs(5);
            assert_eq!(
                read_head(&s, &mut buf, &limits, deadline).await,
                Ok(()),
                "{head:?}"
            );
            assert_eq!(&buf[..], head.as_bytes());
        }
        // A head that is only incomplete still waits for the rest.
        let (mut c, s) = pair().await;
        c.write_all(b"GET / HTTP/1.1\r\nhost: t\r\n")
            .await
            .expect("write");
        let mut buf = BytesMut::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            read_head(&s, &mut buf, &limits, deadline).await,
            Err(HeadError::Overdue)
        );
    }
}
