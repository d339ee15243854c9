//! Precise sleeps for the pacer: tokio's 1 ms wheel is too coarse and a thread costs a hop, so
//! on Linux a `timerfd` on tokio's reactor (tens of µs); elsewhere tokio's timer.

use std::time::{Duration, Instant};

/// One re-armable timer.
pub struct Timer {
    #[cfg(target_os = "linux")]
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

#[cfg(target_os = "linux")]
impl Timer {
    /// Must be called inside the runtime (registers with its reactor).
    pub fn new() -> std::io::Result<Timer> {
        use std::os::fd::FromRawFd as _;
        // SAFETY: plain syscall; the returned descriptor is checked and then owned.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        // SAFETY: the `OwnedFd` is a valid, open descriptor that the `AsyncFd` owns (nobody can
        // close or replace it) until the `AsyncFd` is dropped.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)?
        };
        Ok(Timer { fd })
    }

    fn arm(&self, after: Duration) -> std::io::Result<()> {
        use std::os::fd::AsRawFd as _;
        // A zero `it_value` would disarm the timer: wait at least a nanosecond.
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: valid descriptor, valid pointer to a fully initialised itimerspec.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Sleeps until `deadline` (returns at once when it has passed).
    pub async fn sleep_until(&mut self, deadline: Instant) -> std::io::Result<()> {
        use std::os::fd::AsRawFd as _;
        let now = Instant::now();
        if deadline <= now {
            return Ok(());
        }
        self.arm(deadline - now)?;
        loop {
            let mut guard = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a buffer of 8.
            let n = unsafe {
                libc::read(
                    self.fd.get_ref().as_raw_fd(),
                    expirations.as_mut_ptr().cast(),
                    expirations.len(),
                )
            };
            // Edge-triggered: the readiness is consumed either way, and the one-shot timer
            // cannot fire again before the next `arm`.
            guard.clear_ready();
            if n == 8 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::WouldBlock {
                return Err(e);
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
impl Timer {
    pub fn new() -> std::io::Result<Timer> {
        Ok(Timer {})
    }

    /// Sleeps until `deadline`, to tokio's millisecond.
    pub async fn sleep_until(&mut self, deadline: Instant) -> std::io::Result<()> {
        tokio::time::sleep_until(deadline.into()).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wakes_after_the_deadline_and_at_once_for_a_past_one() {
        let mut t = Timer::new().unwrap();
        for wait in [Duration::from_micros(300), Duration::from_millis(3)] {
            let deadline = Instant::now() + wait;
            t.sleep_until(deadline).await.unwrap();
            assert!(Instant::now() >= deadline);
        }
        let before = Instant::now();
        t.sleep_until(before - Duration::from_millis(1))
            .await
            .unwrap();
        t.sleep_until(before).await.unwrap();
    }
}
