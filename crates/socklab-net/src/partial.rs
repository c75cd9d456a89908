//! Loops that finish partial writes.
//!
//! A `write`-like system call may accept fewer bytes than offered (a signal, a full socket
//! buffer on a socket with a send timeout, a pipe) or fail with `EINTR`. These helpers call the
//! one-shot operation until every byte is accepted and return how many calls they made. They
//! take the operation as a closure, so tests drive them with mocks that accept a few bytes at a
//! time or fail with `EINTR`.

use std::io::{self, IoSlice};
use std::time::Instant;

/// True for the errors of a call that made no progress but may be tried again: `EINTR` (a
/// signal), `EAGAIN` after a send timeout (`SO_SNDTIMEO`), or a non-blocking socket.
pub fn is_no_progress(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// The waiting policy of the plain helpers: try again after `EINTR`, give up on anything else.
pub fn retry_interrupted(e: io::Error, _since: Instant) -> io::Result<()> {
    if e.kind() == io::ErrorKind::Interrupted {
        Ok(())
    } else {
        Err(e)
    }
}

/// Calls `op` until all of `buf` is written. Returns the number of calls that succeeded.
pub fn write_all_with(buf: &[u8], op: impl FnMut(&[u8]) -> io::Result<usize>) -> io::Result<u64> {
    write_all_waiting(buf, op, retry_interrupted)
}

/// [`write_all_with`] where a call without progress (see [`is_no_progress`]) asks
/// `wait(error, since)` whether to go on (`Ok`) or give up (its `Err`); `since` is when the
/// calls stopped making progress. This is where a caller puts its deadline and its Ctrl-C.
pub fn write_all_waiting(
    buf: &[u8],
    mut op: impl FnMut(&[u8]) -> io::Result<usize>,
    wait: impl FnMut(io::Error, Instant) -> io::Result<()>,
) -> io::Result<u64> {
    send_range_waiting(buf.len(), |off, _| op(&buf[off..]), wait)
}

/// Calls the vectored `op` until every byte of `bufs` is written, advancing past what each call
/// accepted (`bufs` is consumed in the process). Returns the number of calls that succeeded.
pub fn write_all_vectored_with(
    bufs: &mut [IoSlice<'_>],
    op: impl FnMut(&[IoSlice<'_>]) -> io::Result<usize>,
) -> io::Result<u64> {
    write_all_vectored_waiting(bufs, op, retry_interrupted)
}

/// [`write_all_vectored_with`] with a waiting policy, as [`write_all_waiting`].
pub fn write_all_vectored_waiting(
    mut bufs: &mut [IoSlice<'_>],
    mut op: impl FnMut(&[IoSlice<'_>]) -> io::Result<usize>,
    mut wait: impl FnMut(io::Error, Instant) -> io::Result<()>,
) -> io::Result<u64> {
    let mut calls = 0;
    let mut stalled = None;
    // Skip leading empty slices so an all-empty input makes no call.
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match op(bufs) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "write accepted 0 bytes",
                ))
            }
            Ok(n) => {
                calls += 1;
                stalled = None;
                let left: usize = bufs.iter().map(|b| b.len()).sum();
                IoSlice::advance_slices(&mut bufs, n.min(left));
            }
            Err(e) if is_no_progress(&e) => wait(e, *stalled.get_or_insert_with(Instant::now))?,
            Err(e) => return Err(e),
        }
    }
    Ok(calls)
}

/// Calls `op(offset, remaining)` until `len` bytes starting at offset 0 are sent (the shape of
/// `sendfile` and `splice`, which take a length rather than a buffer). Returns the calls made.
pub fn send_range_with(
    len: usize,
    op: impl FnMut(usize, usize) -> io::Result<usize>,
) -> io::Result<u64> {
    send_range_waiting(len, op, retry_interrupted)
}

/// [`send_range_with`] with a waiting policy, as [`write_all_waiting`].
pub fn send_range_waiting(
    len: usize,
    mut op: impl FnMut(usize, usize) -> io::Result<usize>,
    mut wait: impl FnMut(io::Error, Instant) -> io::Result<()>,
) -> io::Result<u64> {
    let mut off = 0;
    let mut calls = 0;
    let mut stalled = None;
    while off < len {
        match op(off, len - off) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "call moved 0 bytes",
                ))
            }
            Ok(n) => {
                calls += 1;
                stalled = None;
                off += n.min(len - off);
            }
            Err(e) if is_no_progress(&e) => wait(e, *stalled.get_or_insert_with(Instant::now))?,
            Err(e) => return Err(e),
        }
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A mock descriptor that accepts at most `caps[i % caps.len()]` bytes on call `i` and fails
    /// with EINTR whenever the cap is 0.
    struct Mock {
        out: Vec<u8>,
        caps: Vec<usize>,
        call: usize,
    }

    impl Mock {
        fn cap(&mut self) -> Option<usize> {
            let c = self.caps[self.call % self.caps.len()];
            self.call += 1;
            (c > 0).then_some(c)
        }
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let Some(cap) = self.cap() else {
                return Err(io::ErrorKind::Interrupted.into());
            };
            let n = cap.min(buf.len());
            self.out.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn writev(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let Some(mut cap) = self.cap() else {
                return Err(io::ErrorKind::Interrupted.into());
            };
            let mut n = 0;
            for b in bufs {
                let take = cap.min(b.len());
                self.out.extend_from_slice(&b[..take]);
                n += take;
                cap -= take;
                if cap == 0 {
                    break;
                }
            }
            Ok(n)
        }
    }

    fn chunks(data: &[u8], sizes: &[usize]) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        let mut off = 0;
        for &s in sizes {
            let end = (off + s).min(data.len());
            v.push(data[off..end].to_vec());
            off = end;
        }
        v.push(data[off..].to_vec());
        v
    }

    #[test]
    fn short_writes_are_finished() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut m = Mock {
            out: vec![],
            caps: vec![7, 0, 3],
            call: 0,
        };
        let calls = write_all_with(&data, |b| m.write(b)).unwrap();
        assert_eq!(m.out, data);
        // 100 bytes at 7 or 3 per successful call, EINTR in between: 20 successful calls.
        assert_eq!(calls, 20);
    }

    #[test]
    fn zero_byte_write_is_an_error_not_a_hang() {
        let e = write_all_with(b"abc", |_| Ok(0)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WriteZero);
        let mut v = [IoSlice::new(b"abc")];
        assert!(write_all_vectored_with(&mut v, |_| Ok(0)).is_err());
        assert!(send_range_with(3, |_, _| Ok(0)).is_err());
    }

    #[test]
    fn other_errors_propagate() {
        let e = write_all_with(b"abc", |_| Err(io::ErrorKind::BrokenPipe.into())).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn a_call_without_progress_asks_the_waiting_policy_which_sees_when_the_stall_began() {
        // Two bytes, then EAGAIN three times (a send timeout's tick), one byte, EAGAIN twice.
        let mut script = vec![Ok(2), Err(0), Err(0), Err(0), Ok(1), Err(0), Err(0), Ok(7)];
        script.reverse();
        let mut stalls: Vec<Instant> = Vec::new();
        let calls = write_all_waiting(
            &[0u8; 10],
            |_| match script.pop().unwrap() {
                Ok(n) => Ok(n),
                Err(_) => Err(io::ErrorKind::WouldBlock.into()),
            },
            |e, since| {
                assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
                stalls.push(since);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(calls, 3);
        assert_eq!(stalls.len(), 5);
        // One stall start per run of calls without progress.
        assert!(stalls[0] == stalls[1] && stalls[1] == stalls[2]);
        assert!(stalls[3] == stalls[4] && stalls[3] > stalls[2]);
        // The policy's error ends the loop; the plain helpers give up on EAGAIN.
        let e = write_all_waiting(
            b"abc",
            |_| Err(io::ErrorKind::WouldBlock.into()),
            |_, _| Err(io::Error::other("deadline")),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "deadline");
        let e = write_all_with(b"abc", |_| Err(io::ErrorKind::WouldBlock.into())).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn send_range_covers_every_offset_once() {
        let mut seen = [0u8; 50];
        let calls = send_range_with(50, |off, left| {
            let n = left.min(8);
            for s in &mut seen[off..off + n] {
                *s += 1;
            }
            Ok(n)
        })
        .unwrap();
        assert!(seen.iter().all(|&s| s == 1));
        assert_eq!(calls, 7);
    }

    proptest! {
        #[test]
        fn vectored_short_writes_deliver_every_byte_in_order(
            data in proptest::collection::vec(any::<u8>(), 0..600),
            sizes in proptest::collection::vec(0usize..50, 0..20),
            caps in proptest::collection::vec(0usize..40, 1..8),
        ) {
            prop_assume!(caps.iter().any(|&c| c > 0));
            let parts = chunks(&data, &sizes);
            let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
            let mut m = Mock { out: vec![], caps, call: 0 };
            write_all_vectored_with(&mut slices, |b| m.writev(b)).unwrap();
            prop_assert_eq!(m.out, data);
        }

        #[test]
        fn plain_short_writes_deliver_every_byte_in_order(
            data in proptest::collection::vec(any::<u8>(), 0..600),
            caps in proptest::collection::vec(0usize..40, 1..8),
        ) {
            prop_assume!(caps.iter().any(|&c| c > 0));
            let mut m = Mock { out: vec![], caps, call: 0 };
            write_all_with(&data, |b| m.write(b)).unwrap();
            prop_assert_eq!(m.out, data);
        }
    }
}
