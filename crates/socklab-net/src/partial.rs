//! Loops that finish partial writes.
//!
//! A `write`-like system call may accept fewer bytes than offered (a signal, a full socket
//! buffer on a socket with a send timeout, a pipe) or fail with `EINTR`. These helpers call the
//! one-shot operation until every byte is accepted and return how many calls they made. They
//! take the operation as a closure, so tests drive them with mocks that accept a few bytes at a
//! time or fail with `EINTR`.
//!
//! The `*_waiting` helpers ask a [`Policy`] after every call: after one without progress
//! whether to wait on ([`Policy::stalled`]), and after one that moved bytes whether to go on
//! ([`Policy::moved`]). The second is where a sender's stop flag and deadline are looked at
//! *by time*: a slow reader that takes a few bytes every call keeps every call making progress,
//! so a sender that looked only at stalls would never look (issue 26 item 2).

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

/// What a sending loop asks between its calls.
pub trait Policy {
    /// A call made no progress (see [`is_no_progress`]); the calls have made none since
    /// `since`. `Ok` to try again, or the error to give up with.
    fn stalled(&mut self, e: io::Error, since: Instant) -> io::Result<()>;

    /// A call moved `n` bytes (and another may follow). `Ok` to go on, or the error to give up
    /// with: a sender's stop flag, its test given up, its deadline. Called after every call,
    /// so it must be cheap (an atomic load; the clock only now and then, see [`Every`]).
    fn moved(&mut self, _n: usize) -> io::Result<()> {
        Ok(())
    }
}

/// A closure is a policy that only waits (it never gives up while bytes move).
impl<F: FnMut(io::Error, Instant) -> io::Result<()>> Policy for F {
    fn stalled(&mut self, e: io::Error, since: Instant) -> io::Result<()> {
        self(e, since)
    }
}

/// Says yes once every `N` calls: how a [`Policy::moved`] reads the clock now and then rather
/// than on every call. A blocking send returns within its socket's send timeout (the sink and
/// `socklab bulk` set 100 ms), so a deadline looked at every [`CLOCK_EVERY`] calls is seen
/// within about a second in the worst case and within a few ms on a flowing stream.
#[derive(Debug, Default, Clone, Copy)]
pub struct Every(u32);

/// Calls between two looks at the clock in [`Policy::moved`].
pub const CLOCK_EVERY: u32 = 8;

impl Every {
    /// True on every [`CLOCK_EVERY`]-th call.
    pub fn tick(&mut self) -> bool {
        self.0 += 1;
        if self.0 >= CLOCK_EVERY {
            self.0 = 0;
            true
        } else {
            false
        }
    }
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
    write_all_waiting(buf, op, &mut retry_interrupted)
}

/// [`write_all_with`] where a call without progress (see [`is_no_progress`]) asks
/// `wait.stalled(error, since)` whether to go on (`Ok`) or give up (its `Err`); `since` is when
/// the calls stopped making progress; and a call that moved bytes asks `wait.moved(n)`. This is
/// where a caller puts its deadline and its Ctrl-C.
pub fn write_all_waiting<P: Policy + ?Sized>(
    buf: &[u8],
    mut op: impl FnMut(&[u8]) -> io::Result<usize>,
    wait: &mut P,
) -> io::Result<u64> {
    send_range_waiting(buf.len(), |off, _| op(&buf[off..]), wait)
}

/// Calls the vectored `op` until every byte of `bufs` is written, advancing past what each call
/// accepted (`bufs` is consumed in the process). Returns the number of calls that succeeded.
pub fn write_all_vectored_with(
    bufs: &mut [IoSlice<'_>],
    op: impl FnMut(&[IoSlice<'_>]) -> io::Result<usize>,
) -> io::Result<u64> {
    write_all_vectored_waiting(bufs, op, &mut retry_interrupted)
}

/// [`write_all_vectored_with`] with a waiting policy, as [`write_all_waiting`].
pub fn write_all_vectored_waiting<P: Policy + ?Sized>(
    mut bufs: &mut [IoSlice<'_>],
    mut op: impl FnMut(&[IoSlice<'_>]) -> io::Result<usize>,
    wait: &mut P,
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
                wait.moved(n)?;
            }
            Err(e) if is_no_progress(&e) => {
                wait.stalled(e, *stalled.get_or_insert_with(Instant::now))?
            }
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
    send_range_waiting(len, op, &mut retry_interrupted)
}

/// [`send_range_with`] with a waiting policy, as [`write_all_waiting`].
pub fn send_range_waiting<P: Policy + ?Sized>(
    len: usize,
    mut op: impl FnMut(usize, usize) -> io::Result<usize>,
    wait: &mut P,
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
                wait.moved(n)?;
            }
            Err(e) if is_no_progress(&e) => {
                wait.stalled(e, *stalled.get_or_insert_with(Instant::now))?
            }
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
            &mut |e: io::Error, since| {
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
            &mut |_, _| Err(io::Error::other("deadline")),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "deadline");
        let e = write_all_with(b"abc", |_| Err(io::ErrorKind::WouldBlock.into())).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    /// Issue 26 item 2: a reader that takes a few bytes every call never makes a call fail
    /// without progress, so only [`Policy::moved`] can end the loop: it is asked after every
    /// call that moved bytes, in every helper, and its error ends the loop at once.
    #[test]
    fn a_policy_ends_a_loop_whose_every_call_moves_a_few_bytes() {
        struct GiveUpAfter {
            calls: u32,
            bytes: usize,
        }
        impl Policy for GiveUpAfter {
            fn stalled(&mut self, _: io::Error, _: Instant) -> io::Result<()> {
                panic!("no call stalled")
            }
            fn moved(&mut self, n: usize) -> io::Result<()> {
                self.calls += 1;
                self.bytes += n;
                if self.calls == 5 {
                    Err(io::Error::other("stop"))
                } else {
                    Ok(())
                }
            }
        }
        let fresh = || GiveUpAfter { calls: 0, bytes: 0 };
        let mut p = fresh();
        let e = write_all_waiting(&[0u8; 1000], |_| Ok(3), &mut p).unwrap_err();
        assert_eq!((e.to_string(), p.calls, p.bytes), ("stop".into(), 5, 15));
        let mut p = fresh();
        let mut v = [IoSlice::new(&[0u8; 600]), IoSlice::new(&[0u8; 400])];
        let e = write_all_vectored_waiting(&mut v, |_| Ok(7), &mut p).unwrap_err();
        assert_eq!((e.to_string(), p.calls, p.bytes), ("stop".into(), 5, 35));
        let mut p = fresh();
        let e = send_range_waiting(1000, |_, _| Ok(2), &mut p).unwrap_err();
        assert_eq!((e.to_string(), p.calls, p.bytes), ("stop".into(), 5, 10));
        // The clock's pace: one yes every CLOCK_EVERY calls.
        let mut every = Every::default();
        let yes = (0..CLOCK_EVERY * 3).filter(|_| every.tick()).count();
        assert_eq!(yes, 3);
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
