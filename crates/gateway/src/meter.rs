//! A socket that reads no more than a request may get back: the `redis` crate reads whole
//! replies on its own task, so the socket stops past [`Meter::allowance`] bytes of RESP and the
//! request is refused as too large. Memory per request stays a small multiple of the cap.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// Bytes read per turn at most, through a scratch buffer of this size.
const CHUNK: usize = 64 * 1024;

/// What one request may still read, shared by the socket and the request.
#[derive(Debug)]
pub struct Meter {
    left: AtomicUsize,
    spent: Notify,
}

impl Meter {
    pub fn unlimited() -> Arc<Self> {
        Arc::new(Self {
            left: AtomicUsize::new(usize::MAX),
            spent: Notify::new(),
        })
    }

    /// RESP bytes a request capped at `cap` bytes of JSON may read: four times plus 1 MiB (no
    /// RESP value is over three times its JSON, plus envelopes and `+QUEUED` lines).
    pub fn allowance(cap: usize) -> usize {
        cap.saturating_mul(4).saturating_add(1 << 20)
    }

    /// Starts a request: it may read `bytes` from now on.
    pub fn reset(&self, bytes: usize) {
        self.left.store(bytes, Ordering::Release);
    }

    /// Whether the request has read all it may.
    pub fn is_spent(&self) -> bool {
        self.left.load(Ordering::Acquire) == 0
    }

    /// Completes when the request has read all it may: the socket stopped reading.
    pub async fn spent(&self) {
        self.spent.notified().await;
    }
}

/// A Redis socket whose reads are counted against a [`Meter`].
pub struct Metered {
    inner: TcpStream,
    meter: Arc<Meter>,
    scratch: Box<[u8]>,
}

impl Metered {
    pub fn new(inner: TcpStream, meter: Arc<Meter>) -> Self {
        Self {
            inner,
            meter,
            scratch: vec![0; CHUNK].into_boxed_slice(),
        }
    }
}

impl AsyncRead for Metered {
    /// Once the meter is spent, never ready again: the request gives up its connection.
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let left = self.meter.left.load(Ordering::Acquire);
        if left == 0 {
            self.meter.spent.notify_one();
            return Poll::Pending;
        }
        let max = left.min(buf.remaining()).min(CHUNK);
        let this = &mut *self;
        let mut scratch = ReadBuf::new(&mut this.scratch[..max]);
        match Pin::new(&mut this.inner).poll_read(cx, &mut scratch) {
            Poll::Ready(Ok(())) => {
                let n = scratch.filled().len();
                buf.put_slice(scratch.filled());
                if left != usize::MAX {
                    this.meter.left.fetch_sub(n, Ordering::AcqRel);
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl AsyncWrite for Metered {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn reads_stop_at_the_allowance_and_say_so() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = tokio::spawn(async move {
            let (mut peer, _) = listener.accept().await.unwrap();
            peer.write_all(&[b'x'; 1000]).await.unwrap();
            peer
        });
        let meter = Meter::unlimited();
        let stream = TcpStream::connect(addr).await.unwrap();
        let mut metered = Metered::new(stream, meter.clone());
        let _peer = writer.await.unwrap();
        meter.reset(300);
        let mut got = vec![0u8; 1000];
        let mut read = 0;
        while read < 300 {
            read += metered.read(&mut got[read..]).await.unwrap();
        }
        assert_eq!(read, 300, "never more than allowed");
        assert!(meter.is_spent());
        let more = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            metered.read(&mut got[read..]),
        )
        .await;
        assert!(more.is_err(), "a spent meter reads nothing more");
        tokio::time::timeout(std::time::Duration::from_secs(1), meter.spent())
            .await
            .expect("the request is told");
    }

    #[test]
    fn the_allowance_covers_the_cap_with_room() {
        assert_eq!(Meter::allowance(10), 40 + (1 << 20));
        assert_eq!(Meter::allowance(usize::MAX), usize::MAX);
    }
}
