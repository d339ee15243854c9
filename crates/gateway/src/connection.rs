//! The HTTP connections the server holds: idle ones closed after the idle timeout, slow heads
//! (slowloris) after the header timeout, and at the cap the longest idle shed for a new client.
//! Busy ones are never shed (their body-read and Redis deadlines bound them).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Bounds on connections; built from flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Connections held at once; at the cap the longest-idle one is closed for a new one.
    pub max_connections: usize,
    /// A connection with no request in progress and no bytes of the next one is closed after this.
    pub idle_timeout: Duration,
    /// A request head (request line and headers) must be complete this long after its first byte.
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            idle_timeout: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(10),
        }
    }
}

/// How long a connection asked to close may finish the response it is writing.
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);

const IDLE: u8 = 0;
const HEAD: u8 = 1;
const BUSY: u8 = 2;

/// What one connection is doing, shared between its task, its socket and the table.
pub struct Track {
    phase: AtomicU8,
    /// When the current phase began, in milliseconds since the table's epoch.
    since_ms: AtomicU64,
    epoch: Instant,
    close: Notify,
}

/// Why a connection is being closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    Idle,
    SlowHead,
}

impl Track {
    fn new(epoch: Instant) -> Self {
        let track = Self {
            phase: AtomicU8::new(IDLE),
            since_ms: AtomicU64::new(0),
            epoch,
            close: Notify::new(),
        };
        track.enter(IDLE);
        track
    }

    fn now_ms(&self) -> u64 {
        Instant::now().duration_since(self.epoch).as_millis() as u64
    }

    fn enter(&self, phase: u8) {
        self.since_ms.store(self.now_ms(), Ordering::Relaxed);
        self.phase.store(phase, Ordering::Release);
    }

    /// Bytes arrived: an idle connection starts reading a request head.
    fn on_read(&self) {
        if self
            .phase
            .compare_exchange(IDLE, HEAD, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            self.since_ms.store(self.now_ms(), Ordering::Relaxed);
        }
    }

    /// A request head is complete and the request is being served.
    pub fn begin_request(&self) {
        self.enter(BUSY);
    }

    /// The response is handed to the connection; it is idle again.
    pub fn end_request(&self) {
        self.enter(IDLE);
    }

    /// Whether no request is in progress (idle, or reading a head): such a connection may be shed.
    fn is_sheddable(&self) -> bool {
        self.phase.load(Ordering::Acquire) != BUSY
    }

    /// When the current phase runs out, and why; `None` while busy.
    pub fn deadline(&self, limits: &Limits) -> Option<(Instant, Expiry)> {
        let since = self.epoch + Duration::from_millis(self.since_ms.load(Ordering::Relaxed));
        match self.phase.load(Ordering::Acquire) {
            IDLE => Some((since + limits.idle_timeout, Expiry::Idle)),
            HEAD => Some((since + limits.header_read_timeout, Expiry::SlowHead)),
            _ => None,
        }
    }

    /// Waits until the table asks this connection to close (it was shed).
    pub async fn shed(&self) {
        self.close.notified().await;
    }

    fn since_ms(&self) -> u64 {
        self.since_ms.load(Ordering::Relaxed)
    }
}

/// Every connection the server holds.
#[derive(Clone)]
pub struct Connections {
    inner: Arc<Table>,
}

struct Table {
    limits: Limits,
    epoch: Instant,
    next_id: AtomicU64,
    live: Mutex<HashMap<u64, Arc<Track>>>,
}

/// A connection's place in the table; leaving the table when dropped.
pub struct Admission {
    id: u64,
    pub track: Arc<Track>,
    table: Connections,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.table.lock().remove(&self.id);
    }
}

impl Connections {
    pub fn new(limits: Limits) -> Self {
        Self {
            inner: Arc::new(Table {
                limits,
                epoch: Instant::now(),
                next_id: AtomicU64::new(0),
                live: Mutex::new(HashMap::new()),
            }),
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Track>>> {
        // The table is plain data; a panic elsewhere cannot leave it half-updated.
        self.inner.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a new connection. At the cap, the connection idle longest is asked to close (and
    /// leaves the table at once); when every connection is busy, the new one is refused (`None`).
    pub fn admit(&self) -> Option<Admission> {
        let mut live = self.lock();
        if live.len() >= self.inner.limits.max_connections && !shed_oldest(&mut live) {
            return None;
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let track = Arc::new(Track::new(self.inner.epoch));
        live.insert(id, track.clone());
        Some(Admission {
            id,
            track,
            table: self.clone(),
        })
    }

    /// Frees a slot by shedding the longest-idle connection (when accept runs out of file
    /// descriptors). Returns whether one was found.
    pub fn shed_one(&self) -> bool {
        shed_oldest(&mut self.lock())
    }

    /// Connections held right now.
    pub fn count(&self) -> usize {
        self.lock().len()
    }
}

/// Removes the connection with no request in progress whose phase began earliest, and tells it
/// to close. A linear scan: it runs only at the cap, over at most `max_connections` entries.
fn shed_oldest(live: &mut HashMap<u64, Arc<Track>>) -> bool {
    let oldest = live
        .iter()
        .filter(|(_, t)| t.is_sheddable())
        .min_by_key(|(id, t)| (t.since_ms(), **id))
        .map(|(id, _)| *id);
    match oldest.and_then(|id| live.remove(&id)) {
        Some(track) => {
            // notify_one keeps the wake-up if the task is not waiting yet.
            track.close.notify_one();
            true
        }
        None => false,
    }
}

/// A socket that tells its [`Track`] when bytes arrive, so a connection that starts sending a
/// request head leaves the idle phase.
pub struct TrackedStream<S> {
    inner: S,
    track: Arc<Track>,
}

impl<S> TrackedStream<S> {
    pub fn new(inner: S, track: Arc<Track>) -> Self {
        Self { inner, track }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for TrackedStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.track.on_read();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for TrackedStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize) -> Limits {
        Limits {
            max_connections: max,
            idle_timeout: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(10),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_the_longest_idle_connection_is_shed() {
        let table = Connections::new(limits(3));
        let a = table.admit().unwrap();
        tokio::time::advance(Duration::from_millis(10)).await;
        let b = table.admit().unwrap();
        tokio::time::advance(Duration::from_millis(10)).await;
        let c = table.admit().unwrap();
        // `a` is busy, so `b` is the longest idle.
        a.track.begin_request();
        tokio::time::advance(Duration::from_millis(10)).await;
        let d = table.admit().unwrap();
        assert_eq!(table.count(), 3);
        assert!(!table.lock().contains_key(&b.id));
        // b's task is told to close (the notification waits for it).
        tokio::time::timeout(Duration::from_millis(1), b.track.shed())
            .await
            .expect("b was told to close");

        // With every connection busy, a new one is refused rather than shedding a request.
        for t in [&a, &c, &d] {
            t.track.begin_request();
        }
        assert!(table.admit().is_none());
        c.track.end_request();
        let e = table.admit().expect("c is idle again and is shed for e");
        assert!(!table.lock().contains_key(&c.id));
        drop((a, e));
        assert_eq!(table.count(), 1, "a dropped connection leaves the table");
    }

    #[tokio::test(start_paused = true)]
    async fn deadlines_follow_the_phase() {
        let table = Connections::new(limits(10));
        let conn = table.admit().unwrap();
        let l = table.limits().clone();
        let start = Instant::now();
        let (at, why) = conn.track.deadline(&l).unwrap();
        assert_eq!(
            (at.duration_since(start), why),
            (l.idle_timeout, Expiry::Idle)
        );

        tokio::time::advance(Duration::from_secs(1)).await;
        conn.track.on_read();
        let (at, why) = conn.track.deadline(&l).unwrap();
        assert_eq!(why, Expiry::SlowHead);
        assert_eq!(
            at.duration_since(start),
            Duration::from_secs(1) + l.header_read_timeout
        );
        // More bytes of the same head do not extend it.
        tokio::time::advance(Duration::from_secs(1)).await;
        conn.track.on_read();
        assert_eq!(conn.track.deadline(&l).unwrap().0, at);

        conn.track.begin_request();
        assert!(conn.track.deadline(&l).is_none());
        conn.track.on_read();
        assert!(
            conn.track.deadline(&l).is_none(),
            "bytes during a request do not change it"
        );
        conn.track.end_request();
        assert_eq!(conn.track.deadline(&l).unwrap().1, Expiry::Idle);
    }
}
