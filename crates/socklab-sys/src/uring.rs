//! A safe io_uring ring for the `uring` server design, over the `io-uring` crate.
//!
//! What it offers: multishot `accept`, multishot `recv` into a provided buffer ring the
//! [`Ring`] owns, `send` from a buffer the ring owns until its completion (the bytes are
//! copied into a reused slot: no allocation in steady state), `close` of a connection with
//! every request on it cancelled first, and cancellation of a multishot request. Completions
//! come back as a safe [`Completion`] enum; received bytes are lent through a move-only
//! [`RecvBuf`] the caller hands back with [`Ring::recycle`].
//!
//! Soundness rests on three rules the types enforce: the kernel writes only into buffers that
//! are in the buffer ring, and a [`RecvBuf`] (the only way to read one) exists only for a
//! buffer the kernel gave back and that is not in the ring again; a send buffer is not touched
//! until its completion; and the ring's memory is freed on drop only once every request has
//! completed (otherwise it is leaked, never freed under the kernel).
//!
//! [`Ring::new`] probes what the design needs and names the missing feature in
//! [`Unsupported`] (io_uring disabled by sysctl, `io_uring_setup` refused, an opcode missing,
//! no provided buffer rings). Multishot accept (Linux 5.19) and multishot recv (6.0) cannot be
//! probed: on older kernels their first completion says `EINVAL`.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring, Probe};

/// The top byte of a request's user data says which kind of request it is.
const KIND_SHIFT: u32 = 56;
/// Tokens must fit in the low 56 bits.
pub const TOKEN_MAX: u64 = (1 << KIND_SHIFT) - 1;
const ACCEPT: u64 = 1;
const RECV: u64 = 2;
const SEND: u64 = 3;
const CLOSE: u64 = 4;
const CANCEL: u64 = 5;
/// The buffer group of the ring's provided buffers.
const BGID: u16 = 0;

/// A feature the `uring` design needs and this kernel (or its configuration) refuses.
#[derive(Debug)]
pub struct Unsupported {
    /// The feature, named as the kernel documents it.
    pub feature: &'static str,
    /// What the kernel said.
    pub source: io::Error,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.feature, self.source)
    }
}

impl std::error::Error for Unsupported {}

/// Sizes of a [`Ring`].
#[derive(Debug, Clone, Copy)]
pub struct RingConfig {
    /// Submission queue entries (the completion queue gets twice as many).
    pub entries: u32,
    /// Provided receive buffers (a power of two, at most 32768).
    pub buffers: u16,
    /// Bytes per receive buffer.
    pub buffer_size: u32,
}

/// A completed request.
#[derive(Debug)]
pub enum Completion {
    /// A multishot accept produced a connection (or an error). `more`: the accept goes on.
    Accepted {
        /// The token the accept was submitted with.
        token: u64,
        /// The new connection (`SOCK_CLOEXEC`, blocking mode as the listener's).
        result: io::Result<OwnedFd>,
        /// False when the multishot accept has ended and must be submitted again.
        more: bool,
    },
    /// A multishot recv produced bytes (`Some`), end of stream (`None`) or an error.
    Received {
        /// The token the recv was submitted with.
        token: u64,
        /// The bytes, lent until [`Ring::recycle`].
        result: io::Result<Option<RecvBuf>>,
        /// False when the multishot recv has ended and must be submitted again.
        more: bool,
    },
    /// A send finished: how many bytes went out (may be fewer than asked).
    Sent {
        /// The token the send was submitted with.
        token: u64,
        /// Bytes sent.
        result: io::Result<usize>,
    },
}

/// Received bytes in one of the ring's provided buffers. Read them with [`Ring::buffer`],
/// give the buffer back with [`Ring::recycle`] (a buffer never given back is lost to the ring:
/// receives end with `ENOBUFS` once all are).
#[must_use = "give the buffer back with Ring::recycle"]
#[derive(Debug)]
pub struct RecvBuf {
    bid: u16,
    len: u32,
    ring: usize,
}

impl RecvBuf {
    /// Number of bytes received.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when no byte is in it (never for a `Received` completion).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// An anonymous private mapping, unmapped on drop.
struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; nothing ties it to a thread.
unsafe impl Send for Mmap {}

impl Mmap {
    fn new(len: usize) -> io::Result<Mmap> {
        // SAFETY: an anonymous private mapping at an address the kernel chooses; no existing
        // memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?,
            len,
        })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        if self.len == 0 {
            return; // leaked on purpose (see Ring's Drop)
        }
        // SAFETY: `ptr`/`len` describe a mapping this value created and nobody else unmaps;
        // the ring frees (rather than leaks) its mappings only once the kernel is done.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// `struct io_uring_buf`: one buffer-ring entry. The `resv` field of entry 0 is the ring's
/// tail, written by us and read by the kernel.
#[repr(C)]
struct RawBuf {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

/// The provided buffer ring: entries and buffer memory.
struct BufRing {
    entries: Mmap,
    data: Mmap,
    count: u16,
    size: u32,
    tail: u16,
    /// True while the caller holds a buffer (it is not in the ring).
    lent: Vec<bool>,
}

impl BufRing {
    /// Puts buffer `bid` back at the tail and publishes the new tail.
    fn push(&mut self, bid: u16) {
        let idx = usize::from(self.tail & (self.count - 1));
        let base = self.entries.ptr.as_ptr().cast::<RawBuf>();
        let addr = self.data.ptr.as_ptr() as u64 + u64::from(bid) * u64::from(self.size);
        // SAFETY: `idx < count` so the entry lies in the mapping; the kernel does not read
        // this entry (it owns at most count-1 buffers while `bid` was lent, so the slot at the
        // tail is free); only addr/len/bid are written, not entry 0's `resv` (the tail).
        unsafe {
            let e = base.add(idx);
            std::ptr::addr_of_mut!((*e).addr).write(addr);
            std::ptr::addr_of_mut!((*e).len).write(self.size);
            std::ptr::addr_of_mut!((*e).bid).write(bid);
        }
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail is the u16 at offset 14 of the page-aligned ring (aligned, in the
        // mapping, alive as long as self); the kernel reads it, we alone write it, atomically.
        let tail = unsafe { AtomicU16::from_ptr(std::ptr::addr_of_mut!((*base).resv)) };
        tail.store(self.tail, Ordering::Release);
    }
}

/// Reused send buffers: a slot is busy from its send's submission until its completion.
struct SendSlots {
    bufs: Vec<Vec<u8>>,
    token: Vec<u64>,
    free: Vec<u32>,
}

/// One io_uring with its provided buffer ring and send buffers. Single-threaded: create it on
/// the thread that uses it (it is set up `SINGLE_ISSUER`/`DEFER_TASKRUN` where the kernel
/// allows).
pub struct Ring {
    // Declared first: dropped (closed) before the memory below is unmapped.
    ring: IoUring,
    bufs: BufRing,
    sends: SendSlots,
    cqes: VecDeque<cqueue::Entry>,
    /// Requests submitted whose last completion has not arrived.
    inflight: usize,
    /// Unique among the rings of the process: a [`RecvBuf`] names its ring.
    id: usize,
}

/// The next [`Ring`]'s id.
static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

impl fmt::Debug for Ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("buffers", &self.bufs.count)
            .field("buffer_size", &self.bufs.size)
            .field("inflight", &self.inflight)
            .finish()
    }
}

fn unsupported(feature: &'static str, source: io::Error) -> Unsupported {
    Unsupported { feature, source }
}

fn os_err(res: i32) -> io::Error {
    io::Error::from_raw_os_error(-res)
}

impl Ring {
    /// Sets up a ring, checks the opcodes the server design uses, and registers the provided
    /// buffer ring.
    pub fn new(cfg: &RingConfig) -> Result<Ring, Unsupported> {
        if let Ok(v) = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
            if v.trim() == "2" {
                return Err(unsupported(
                    "io_uring (disabled by the sysctl kernel.io_uring_disabled=2)",
                    io::Error::from_raw_os_error(libc::EPERM),
                ));
            }
        }
        if !cfg.buffers.is_power_of_two() || cfg.buffers > 32768 || cfg.buffer_size == 0 {
            return Err(unsupported(
                "a provided buffer ring of this size (a power of two up to 32768 buffers)",
                io::Error::from_raw_os_error(libc::EINVAL),
            ));
        }
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_coop_taskrun()
            .setup_cqsize(cfg.entries * 4)
            .build(cfg.entries)
            .or_else(|_| IoUring::builder().build(cfg.entries))
            .map_err(|e| {
                let feature = match e.raw_os_error() {
                    Some(libc::ENOSYS) => "io_uring_setup (not in this kernel)",
                    Some(libc::EPERM) => {
                        "io_uring_setup (refused: kernel.io_uring_disabled=1 without the io_uring group, or a seccomp filter)"
                    }
                    _ => "io_uring_setup",
                };
                unsupported(feature, e)
            })?;
        if !ring.params().is_feature_ext_arg() {
            return Err(unsupported(
                "IORING_FEAT_EXT_ARG (timed waits, Linux 5.11)",
                io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            ));
        }
        let mut probe = Probe::new();
        ring.submitter()
            .register_probe(&mut probe)
            .map_err(|e| unsupported("IORING_REGISTER_PROBE (Linux 5.6)", e))?;
        for (code, name) in [
            (opcode::AcceptMulti::CODE, "IORING_OP_ACCEPT"),
            (opcode::RecvMulti::CODE, "IORING_OP_RECV"),
            (opcode::Send::CODE, "IORING_OP_SEND"),
            (opcode::Close::CODE, "IORING_OP_CLOSE"),
            (opcode::AsyncCancel::CODE, "IORING_OP_ASYNC_CANCEL"),
        ] {
            if !probe.is_supported(code) {
                return Err(unsupported(
                    name,
                    io::Error::from_raw_os_error(libc::EOPNOTSUPP),
                ));
            }
        }
        let count = cfg.buffers;
        let page = 4096usize;
        let ring_bytes = (usize::from(count) * std::mem::size_of::<RawBuf>()).div_ceil(page) * page;
        let mem = |e| unsupported("memory for the provided buffer ring", e);
        let entries = Mmap::new(ring_bytes).map_err(mem)?;
        let data = Mmap::new(usize::from(count) * cfg.buffer_size as usize).map_err(mem)?;
        // SAFETY: `entries` is a page-aligned mapping of at least `count` entries that lives
        // as long as the ring: the field order drops (closes) the ring before unmapping, and
        // Drop leaks the memory if requests are still in flight.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                entries.ptr.as_ptr() as u64,
                count,
                BGID,
                0,
            )
        }
        .map_err(|e| {
            unsupported(
                "provided buffer rings (IORING_REGISTER_PBUF_RING, Linux 5.19)",
                e,
            )
        })?;
        let mut bufs = BufRing {
            entries,
            data,
            count,
            size: cfg.buffer_size,
            tail: 0,
            lent: vec![false; usize::from(count)],
        };
        for bid in 0..count {
            bufs.push(bid);
        }
        Ok(Ring {
            ring,
            bufs,
            sends: SendSlots {
                bufs: Vec::new(),
                token: Vec::new(),
                free: Vec::new(),
            },
            cqes: VecDeque::new(),
            inflight: 0,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Queues `entries` (submitting first if the queue lacks room for all of them).
    ///
    /// # Safety
    ///
    /// Every pointer in `entries` must stay valid until the request's last completion.
    unsafe fn push(&mut self, entries: &[squeue::Entry]) -> io::Result<()> {
        let room = {
            let sq = self.ring.submission();
            sq.capacity() - sq.len()
        };
        if room < entries.len() {
            self.ring.submit()?;
        }
        // SAFETY: the caller guarantees the entries' pointers; the queue has room now.
        unsafe { self.ring.submission().push_multiple(entries) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        self.inflight += entries.len();
        Ok(())
    }

    fn check(token: u64) {
        assert!(token <= TOKEN_MAX, "io_uring token {token:#x} over 56 bits");
    }

    /// Starts a multishot accept on `listener`; connections come back as
    /// [`Completion::Accepted`] with `token`.
    pub fn accept_multi(&mut self, listener: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        Self::check(token);
        let e = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(ACCEPT << KIND_SHIFT | token);
        // SAFETY: the entry holds no pointer (no peer address is asked for); the kernel holds
        // its own reference to the listener's file.
        unsafe { self.push(&[e]) }
    }

    /// Starts a multishot recv on `fd` into the ring's provided buffers; bytes come back as
    /// [`Completion::Received`] with `token`.
    pub fn recv_multi(&mut self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        Self::check(token);
        let e = opcode::RecvMulti::new(types::Fd(fd.as_raw_fd()), BGID)
            .build()
            .user_data(RECV << KIND_SHIFT | token);
        // SAFETY: the entry's only memory is the registered buffer group, which the ring owns
        // until every request has completed.
        unsafe { self.push(&[e]) }
    }

    /// Sends (a copy of) `data` on `fd` with `MSG_NOSIGNAL`; the result comes back as
    /// [`Completion::Sent`] with `token`. Sends at most 1 GiB at a time.
    pub fn send(&mut self, fd: BorrowedFd<'_>, data: &[u8], token: u64) -> io::Result<()> {
        Self::check(token);
        let data = &data[..data.len().min(1 << 30)];
        let slot = match self.sends.free.pop() {
            Some(s) => s as usize,
            None => {
                self.sends.bufs.push(Vec::new());
                self.sends.token.push(0);
                self.sends.bufs.len() - 1
            }
        };
        let buf = &mut self.sends.bufs[slot];
        buf.clear();
        buf.extend_from_slice(data);
        self.sends.token[slot] = token;
        let e = opcode::Send::new(types::Fd(fd.as_raw_fd()), buf.as_ptr(), buf.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(SEND << KIND_SHIFT | slot as u64);
        // SAFETY: the slot's heap buffer is neither touched nor freed until this send's
        // completion returns the slot (moving the Vec header does not move its heap memory),
        // and Drop leaks the slots if a send never completes.
        let r = unsafe { self.push(&[e]) };
        if r.is_err() {
            self.sends.free.push(slot as u32);
        }
        r
    }

    /// Closes a connection: cancels every request on it, then closes it (linked, so the
    /// descriptor stays valid for the cancellation). Completions of the cancelled requests
    /// still arrive (with `ECANCELED`).
    pub fn close(&mut self, fd: OwnedFd) -> io::Result<()> {
        let raw = fd.into_raw_fd();
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(raw)).all())
            .build()
            .flags(squeue::Flags::IO_HARDLINK)
            .user_data(CANCEL << KIND_SHIFT);
        let close = opcode::Close::new(types::Fd(raw))
            .build()
            .user_data(CLOSE << KIND_SHIFT);
        // SAFETY: neither entry holds a pointer; the descriptor was taken out of its OwnedFd
        // and is closed by the second request alone.
        let r = unsafe { self.push(&[cancel, close]) };
        if r.is_err() {
            // SAFETY: the requests were not queued: the descriptor is still ours to close.
            drop(unsafe { OwnedFd::from_raw_fd(raw) });
        }
        r
    }

    /// Cancels the multishot accept of `token` (its last completion says `ECANCELED`).
    pub fn cancel_accept(&mut self, token: u64) -> io::Result<()> {
        self.cancel(ACCEPT << KIND_SHIFT | token)
    }

    /// Cancels the multishot recv of `token` (its last completion says `ECANCELED`).
    pub fn cancel_recv(&mut self, token: u64) -> io::Result<()> {
        self.cancel(RECV << KIND_SHIFT | token)
    }

    fn cancel(&mut self, user_data: u64) -> io::Result<()> {
        let e = opcode::AsyncCancel::new(user_data)
            .build()
            .user_data(CANCEL << KIND_SHIFT);
        // SAFETY: the entry holds no pointer.
        unsafe { self.push(&[e]) }
    }

    /// Submits what is queued and waits up to `timeout` for at least one completion, then
    /// takes every completion available (read them with [`Ring::next_completion`]).
    pub fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) => {}
            Err(e) => return Err(e),
        }
        self.cqes.extend(self.ring.completion());
        Ok(())
    }

    /// The next completion taken by [`Ring::wait`] (internal ones, of closes and
    /// cancellations, are skipped).
    pub fn next_completion(&mut self) -> Option<Completion> {
        loop {
            let cqe = self.cqes.pop_front()?;
            if let Some(c) = self.convert(&cqe) {
                return Some(c);
            }
        }
    }

    fn convert(&mut self, cqe: &cqueue::Entry) -> Option<Completion> {
        let ud = cqe.user_data();
        let token = ud & TOKEN_MAX;
        let res = cqe.result();
        let flags = cqe.flags();
        let more = cqueue::more(flags);
        if !more {
            self.inflight = self.inflight.saturating_sub(1);
        }
        match ud >> KIND_SHIFT {
            ACCEPT => Some(Completion::Accepted {
                token,
                result: if res >= 0 {
                    // SAFETY: a successful accept's result is a new descriptor that nobody
                    // else owns.
                    Ok(unsafe { OwnedFd::from_raw_fd(res) })
                } else {
                    Err(os_err(res))
                },
                more,
            }),
            RECV => {
                let buf = cqueue::buffer_select(flags).and_then(|bid| {
                    let i = usize::from(bid);
                    if i >= self.bufs.lent.len() || self.bufs.lent[i] {
                        return None; // not a buffer of ours to lend (never expected)
                    }
                    self.bufs.lent[i] = true;
                    Some(RecvBuf {
                        bid,
                        len: res.max(0) as u32,
                        ring: self.id(),
                    })
                });
                let result = match (res, buf) {
                    (r, Some(b)) if r > 0 => Ok(Some(b)),
                    (r, b) => {
                        if let Some(b) = b {
                            self.recycle(b);
                        }
                        if r == 0 {
                            Ok(None)
                        } else {
                            Err(os_err(r))
                        }
                    }
                };
                Some(Completion::Received {
                    token,
                    result,
                    more,
                })
            }
            SEND => {
                let slot = token as usize;
                let t = self.sends.token.get(slot).copied()?;
                self.sends.free.push(slot as u32);
                Some(Completion::Sent {
                    token: t,
                    result: if res >= 0 {
                        Ok(res as usize)
                    } else {
                        Err(os_err(res))
                    },
                })
            }
            _ => None,
        }
    }

    fn id(&self) -> usize {
        self.id
    }

    /// The bytes of a received buffer.
    pub fn buffer(&self, b: &RecvBuf) -> &[u8] {
        assert_eq!(b.ring, self.id(), "a RecvBuf of another ring");
        let i = usize::from(b.bid);
        assert!(self.bufs.lent[i]);
        let len = (b.len as usize).min(self.bufs.size as usize);
        // SAFETY: buffer `bid` is lent (not in the ring: the kernel finished writing it before
        // posting the completion and cannot select it again until it is recycled, which needs
        // `&mut self` and consumes `b`); it lies inside the data mapping, alive as long as
        // `self`.
        unsafe {
            std::slice::from_raw_parts(
                self.bufs.data.ptr.as_ptr().add(i * self.bufs.size as usize),
                len,
            )
        }
    }

    /// Gives a received buffer back to the kernel.
    pub fn recycle(&mut self, b: RecvBuf) {
        assert_eq!(b.ring, self.id(), "a RecvBuf of another ring");
        let i = usize::from(b.bid);
        assert!(self.bufs.lent[i]);
        self.bufs.lent[i] = false;
        self.bufs.push(b.bid);
    }

    /// Requests whose last completion has not been taken yet.
    pub fn inflight(&self) -> usize {
        self.inflight
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // Cancel whatever is still running and wait (bounded) until the kernel is done with
        // our memory; descriptors accepted meanwhile are closed as their completions drop.
        if self.inflight > 0 {
            let any = opcode::AsyncCancel2::new(types::CancelBuilder::any())
                .build()
                .user_data(CANCEL << KIND_SHIFT);
            // SAFETY: the entry holds no pointer.
            let _ = unsafe { self.push(&[any]) };
            let deadline = Instant::now() + Duration::from_secs(2);
            while self.inflight > 0 && Instant::now() < deadline {
                if self.wait(Duration::from_millis(10)).is_err() {
                    break;
                }
                while let Some(c) = self.next_completion() {
                    if let Completion::Received {
                        result: Ok(Some(b)),
                        ..
                    } = c
                    {
                        self.recycle(b);
                    }
                }
            }
        }
        while let Some(c) = self.next_completion() {
            drop(c);
        }
        if self.inflight > 0 {
            // The kernel may still write into the buffers or read a send buffer: leak them
            // rather than free memory under it.
            self.bufs.entries.len = 0;
            self.bufs.data.len = 0;
            std::mem::forget(std::mem::take(&mut self.sends.bufs));
        } else {
            let _ = self.ring.submitter().unregister_buf_ring(BGID);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    fn ring() -> Ring {
        Ring::new(&RingConfig {
            entries: 64,
            buffers: 8,
            buffer_size: 64,
        })
        .unwrap_or_else(|e| panic!("io_uring is needed for these tests: {e}"))
    }

    fn next(r: &mut Ring) -> Completion {
        for _ in 0..500 {
            if let Some(c) = r.next_completion() {
                return c;
            }
            r.wait(Duration::from_millis(10)).unwrap();
        }
        panic!("no completion");
    }

    #[test]
    fn accept_recv_send_close() {
        let mut r = ring();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        r.accept_multi(l.as_fd(), 1).unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let Completion::Accepted {
            token: 1,
            result: Ok(fd),
            more: true,
        } = next(&mut r)
        else {
            panic!("expected an accepted connection")
        };
        r.recv_multi(fd.as_fd(), 2).unwrap();
        // More bytes than one buffer: several completions, in order.
        let msg: Vec<u8> = (0..200u8).collect();
        c.write_all(&msg).unwrap();
        let mut got = Vec::new();
        while got.len() < msg.len() {
            match next(&mut r) {
                Completion::Received {
                    token: 2,
                    result: Ok(Some(b)),
                    more: true,
                } => {
                    assert!(b.len() <= 64);
                    got.extend_from_slice(r.buffer(&b));
                    r.recycle(b);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(got, msg);
        r.send(fd.as_fd(), b"hello", 3).unwrap();
        let Completion::Sent {
            token: 3,
            result: Ok(5),
        } = next(&mut r)
        else {
            panic!("expected a send")
        };
        let mut five = [0u8; 5];
        c.read_exact(&mut five).unwrap();
        assert_eq!(&five, b"hello");
        // Closing cancels the recv; the client sees end of stream.
        r.close(fd).unwrap();
        let mut rest = Vec::new();
        loop {
            r.wait(Duration::from_millis(10)).unwrap();
            while let Some(c) = r.next_completion() {
                if let Completion::Received {
                    result: Ok(Some(b)),
                    ..
                } = c
                {
                    r.recycle(b);
                }
            }
            if r.inflight() <= 1 {
                break; // only the accept is left
            }
        }
        assert_eq!(c.read_to_end(&mut rest).unwrap(), 0);
        r.cancel_accept(1).unwrap();
        match next(&mut r) {
            Completion::Accepted {
                result: Err(e),
                more: false,
                ..
            } => assert_eq!(e.raw_os_error(), Some(libc::ECANCELED)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn end_of_stream_and_out_of_buffers() {
        let mut r = ring();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        r.recv_multi(s.as_fd(), 9).unwrap();
        // 8 buffers of 64 bytes: hold them all, the recv ends with ENOBUFS.
        c.write_all(&[7u8; 64 * 8 + 100]).unwrap();
        let mut held = Vec::new();
        let err = loop {
            match next(&mut r) {
                Completion::Received {
                    result: Ok(Some(b)),
                    ..
                } => held.push(b),
                Completion::Received {
                    result: Err(e),
                    more: false,
                    ..
                } => break e,
                other => panic!("unexpected {other:?}"),
            }
        };
        assert_eq!(err.raw_os_error(), Some(libc::ENOBUFS));
        assert_eq!(held.len(), 8);
        for b in held {
            r.recycle(b);
        }
        r.recv_multi(s.as_fd(), 9).unwrap();
        drop(c);
        let mut total = 0;
        loop {
            match next(&mut r) {
                Completion::Received {
                    result: Ok(Some(b)),
                    ..
                } => {
                    total += b.len();
                    r.recycle(b);
                }
                Completion::Received {
                    result: Ok(None), ..
                } => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(total, 100);
    }

    #[test]
    fn dropping_a_ring_with_requests_in_flight_cancels_them() {
        let mut r = ring();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        r.accept_multi(l.as_fd(), 1).unwrap();
        r.wait(Duration::from_millis(1)).unwrap();
        assert_eq!(r.inflight(), 1);
        drop(r);
        // The listener is free again: a plain accept still works.
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        l.accept().unwrap();
    }
}
