//! The sending side of a bulk stream, shared by the client (`socklab bulk`, up streams) and the
//! sink (down streams of `--reverse`/`--bidir`): the write strategies' per-round state
//! ([`Sender`]) and the sender's socket options (congestion control, `TCP_NODELAY`, `SO_SNDBUF`,
//! `SO_MAX_PACING_RATE`), set and read back.

use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::SockRef;
use socklab_sys::io as sysio;
use socklab_sys::zerocopy::{self, Completions};

use crate::partial::{send_range_waiting, write_all_vectored_waiting, write_all_waiting, Policy};
use crate::payload::Payload;
use crate::{NetError, Strategy};

/// The options of a sending socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendOpts {
    /// Congestion control (always set: the kernel's default differs between machines).
    pub cc: String,
    /// `TCP_NODELAY`.
    pub nodelay: bool,
    /// `SO_SNDBUF` (`None`: autotuning).
    pub sndbuf: Option<usize>,
    /// `SO_MAX_PACING_RATE`, bytes/s (`None`: unlimited).
    pub pacing: Option<u64>,
}

/// What a sending socket runs with, read back from the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SendApplied {
    /// `TCP_CONGESTION`.
    pub cc: String,
    /// `SO_SNDBUF`.
    pub sndbuf: usize,
    /// `SO_MAX_PACING_RATE`, bytes/s (`None`: unlimited).
    pub pacing: Option<u64>,
}

/// The congestion-control names this kernel offers, for messages.
pub fn available_cc() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default()
        .trim()
        .to_string()
}

impl SendOpts {
    /// Sets the options on `sock` (before or after connect).
    pub fn apply(&self, sock: SockRef<'_>) -> Result<(), NetError> {
        sock.set_tcp_congestion(self.cc.as_bytes())
            .map_err(|source| NetError::SockOpt {
                option: "cc",
                value: self.cc.clone(),
                hint: format!(
                    " (available here: {}; load a module with `modprobe tcp_{}` or choose another `cc`)",
                    available_cc(),
                    self.cc
                ),
                source,
            })?;
        if self.nodelay {
            sock.set_nodelay(true).map_err(|source| NetError::SockOpt {
                option: "nodelay",
                value: "1".into(),
                source,
                hint: String::new(),
            })?;
        }
        if let Some(n) = self.sndbuf {
            sock.set_send_buffer_size(n)
                .map_err(|source| NetError::SockOpt {
                    option: "sndbuf",
                    value: n.to_string(),
                    source,
                    hint: String::new(),
                })?;
        }
        if let Some(rate) = self.pacing {
            socklab_sys::sockopt::set_max_pacing_rate(sock.as_fd(), rate).map_err(|source| {
                NetError::SockOpt {
                    option: "pacing_rate",
                    value: format!("{rate} bytes/s"),
                    source,
                    hint: " (SO_MAX_PACING_RATE needs Linux 3.13 or later)".into(),
                }
            })?;
        }
        Ok(())
    }
}

/// Reads back what a sending socket runs with.
pub fn read_back(sock: SockRef<'_>) -> Result<SendApplied, NetError> {
    let cc = sock
        .tcp_congestion()
        .map(|v| {
            String::from_utf8_lossy(&v)
                .trim_end_matches('\0')
                .to_string()
        })
        .map_err(|e| NetError::io("getsockopt TCP_CONGESTION", e))?;
    let pacing = socklab_sys::sockopt::max_pacing_rate(sock.as_fd())
        .ok()
        .filter(|&r| r != u64::MAX);
    Ok(SendApplied {
        cc,
        sndbuf: sock.send_buffer_size().unwrap_or(0),
        pacing,
    })
}

/// Per-strategy state kept across rounds (no allocation on the hot path): the iovec arrays,
/// the sendfile source file, the splice pipe, prepared before the clock starts.
pub struct Sender<'a>(Kind<'a>);

impl std::fmt::Debug for Sender<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match &self.0 {
            Kind::Write => "write",
            Kind::Single => "single",
            Kind::Vectored { .. } => "vectored",
            Kind::Sendfile(_) => "sendfile",
            Kind::Splice { .. } => "splice",
        };
        f.debug_tuple("Sender").field(&name).finish()
    }
}

enum Kind<'a> {
    Write,
    Single,
    Vectored {
        template: Vec<IoSlice<'a>>,
        scratch: Vec<IoSlice<'a>>,
        zerocopy: Option<(Completions, u64)>,
        use_sendmsg: bool,
    },
    Sendfile(Arc<File>),
    Splice {
        r: OwnedFd,
        w: OwnedFd,
        cap: usize,
    },
}

/// The file `sendfile` sends from: one round of `payload`, in an unlinked temporary file
/// (`$TMPDIR`), `payload.round_len()` bytes of disk (of memory on tmpfs) until the last handle
/// is dropped. Made once per test and shared by its streams (see [`Sender::new`]): `sendfile`
/// reads it at an offset of its own, never the file's position.
pub fn sendfile_source(payload: &Payload) -> Result<Arc<File>, NetError> {
    let mut f =
        tempfile::tempfile().map_err(|e| NetError::io("creating the sendfile source file", e))?;
    f.write_all(payload.round())
        .map_err(|e| NetError::io("writing the sendfile source file", e))?;
    Ok(Arc::new(f))
}

impl<'a> Sender<'a> {
    /// Prepares `strategy` to send rounds of `payload` on `sock` (for zerocopy: `SO_ZEROCOPY`).
    /// For sendfile it sends from `source` (a test's [`sendfile_source`], shared by its
    /// streams), or from a file of its own when `None`.
    pub fn new(
        strategy: Strategy,
        payload: &'a Payload,
        sock: BorrowedFd<'_>,
        source: Option<&Arc<File>>,
    ) -> Result<Sender<'a>, NetError> {
        let vectored = |zc: bool, use_sendmsg: bool| {
            let template: Vec<IoSlice<'a>> = (0..payload.nbufs())
                .map(|i| IoSlice::new(payload.buf(i)))
                .collect();
            Kind::Vectored {
                scratch: template.clone(),
                template,
                zerocopy: zc.then_some((Completions::default(), 0)),
                use_sendmsg,
            }
        };
        Ok(Sender(match strategy {
            Strategy::Write => Kind::Write,
            Strategy::Single => Kind::Single,
            Strategy::Writev => vectored(false, false),
            Strategy::Sendmsg => vectored(false, true),
            Strategy::Zerocopy => {
                zerocopy::enable(sock).map_err(|source| NetError::SockOpt {
                    option: "zerocopy",
                    value: "1".into(),
                    source,
                    hint: " (SO_ZEROCOPY needs Linux 4.14 or later)".into(),
                })?;
                vectored(true, true)
            }
            Strategy::Sendfile => Kind::Sendfile(match source {
                Some(f) => f.clone(),
                None => sendfile_source(payload)?,
            }),
            Strategy::Splice => {
                let (r, w) = sysio::pipe().map_err(|e| NetError::io("pipe", e))?;
                let want = payload.round_len().clamp(4096, sysio::pipe_max_size());
                let cap = sysio::set_pipe_size(w.as_fd(), want).unwrap_or(65536);
                Kind::Splice { r, w, cap }
            }
        }))
    }

    /// Sends one round; returns the send calls made. A call without progress (the send
    /// timeout's tick, `EINTR`) asks `wait` whether to go on, and so does every call that moved
    /// bytes ([`Policy::moved`]: the stop flag and the deadline, looked at by time).
    pub fn round(
        &mut self,
        sock: BorrowedFd<'_>,
        payload: &Payload,
        wait: &mut dyn Policy,
    ) -> io::Result<u64> {
        match &mut self.0 {
            Kind::Write => {
                let mut calls = 0;
                for i in 0..payload.nbufs() {
                    calls +=
                        write_all_waiting(payload.buf(i), |b| sysio::write(sock, b), &mut *wait)?;
                }
                Ok(calls)
            }
            Kind::Single => write_all_waiting(payload.round(), |b| sysio::write(sock, b), wait),
            Kind::Vectored {
                template,
                scratch,
                zerocopy,
                use_sendmsg,
            } => {
                scratch.copy_from_slice(template);
                match zerocopy {
                    None if *use_sendmsg => {
                        write_all_vectored_waiting(scratch, |b| sysio::sendmsg(sock, b, 0), wait)
                    }
                    None => write_all_vectored_waiting(scratch, |b| sysio::writev(sock, b), wait),
                    Some((done, issued)) => {
                        let calls = write_all_vectored_waiting(
                            scratch,
                            |b| match sysio::sendmsg(sock, b, zerocopy::MSG_ZEROCOPY) {
                                Ok(n) => {
                                    *issued += 1;
                                    Ok(n)
                                }
                                // Too many unacknowledged zerocopy sends: wait (a tick at most)
                                // for completions, then count it as a call without progress.
                                Err(e) if e.raw_os_error() == Some(socklab_sys::errno::ENOBUFS) => {
                                    sysio::poll_one(sock, sysio::poll_flags::ERR, 100)?;
                                    zerocopy::reap(sock, done)?;
                                    Err(io::ErrorKind::WouldBlock.into())
                                }
                                Err(e) => Err(e),
                            },
                            wait,
                        )?;
                        zerocopy::reap(sock, done)?;
                        Ok(calls)
                    }
                }
            }
            Kind::Sendfile(file) => {
                let ffd = file.as_fd();
                send_range_waiting(
                    payload.round_len(),
                    |off, left| {
                        let mut o = off as i64;
                        sysio::sendfile(sock, ffd, &mut o, left)
                    },
                    wait,
                )
            }
            Kind::Splice { r, w, cap } => {
                let round = payload.round();
                let (r, w, cap) = (r.as_fd(), w.as_fd(), *cap);
                let mut calls = 0;
                let mut off = 0;
                while off < round.len() {
                    let end = (off + cap).min(round.len());
                    // The pipe is empty here (each chunk is spliced out whole before the next),
                    // so this never blocks.
                    let n = loop {
                        match sysio::vmsplice(w, &[IoSlice::new(&round[off..end])]) {
                            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                            Ok(n) => break n,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(e),
                        }
                    };
                    calls += 1;
                    calls += send_range_waiting(
                        n,
                        |_, left| sysio::splice(r, sock, left, true),
                        &mut *wait,
                    )?;
                    off += n;
                }
                Ok(calls)
            }
        }
    }

    /// Waits for outstanding zerocopy completions (at most `timeout`, and not past `stop()`).
    pub fn drain(
        &mut self,
        sock: BorrowedFd<'_>,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> io::Result<Option<Completions>> {
        let Kind::Vectored {
            zerocopy: Some((done, issued)),
            ..
        } = &mut self.0
        else {
            return Ok(None);
        };
        let deadline = Instant::now() + timeout;
        while done.completed < *issued && Instant::now() < deadline && !stop() {
            sysio::poll_one(sock, sysio::poll_flags::ERR, 50)?;
            zerocopy::reap(sock, done)?;
        }
        Ok(Some(*done))
    }
}
