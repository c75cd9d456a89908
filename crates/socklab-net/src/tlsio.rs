//! TLS over the blocking sockets of bulk's two ends (`bulk` with `tls`): rustls in user space,
//! driven by hand so that the socket's tick timeouts (`SO_RCVTIMEO`/`SO_SNDTIMEO`) stay the
//! callers' bounds, and so that every system call is counted.
//!
//! - Reads: one `read()` of up to the stream's read size fills a buffer of ours, which rustls
//!   then deframes record by record (rustls' own `read_tls` reads 4 KiB a call, which would
//!   make a TLS receiver pay eight or more system calls where a plain one pays one).
//!   [`TlsStream::socket_reads`] counts the `read()` calls that returned data.
//! - Writes: the plaintext of a chunk is encrypted into records of at most 16 KiB, then
//!   flushed with `writev()` of up to 64 records a call ([`TlsStream::socket_writes`]).
//!   [`TlsStream::round`] maps the write strategies that copy from user memory onto this:
//!   `write` flushes after each buffer, `single`, `writev` and `sendmsg` after the round.
//!   The strategies that hand the kernel pages to send as they are (sendfile, splice,
//!   zerocopy) cannot carry user-space TLS: [`user_space_capable`] says so in one line.
//! - A call that made no progress (the tick timeout) asks the caller's [`Policy`]; so does
//!   every call that moved bytes. The handshake is bounded by the same policy.
//! - End of stream: `close_notify`, then the caller's FIN. A peer that closes without one
//!   makes [`TlsStream::read`] fail with `UnexpectedEof` (a truncated stream is no clean end).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

use rustls::pki_types::ServerName;
use socklab_tls::Negotiated;

use crate::partial::{is_no_progress, Policy};
use crate::payload::Payload;
use crate::Strategy;

/// Most plaintext bytes rustls holds encrypted before a flush.
const BUFFER_LIMIT: usize = 1 << 20;

/// Whether `strategy` can carry user-space TLS; `Err` is the one-line reason and the fix.
pub fn user_space_capable(strategy: Strategy) -> Result<(), String> {
    match strategy {
        Strategy::Write | Strategy::Single | Strategy::Writev | Strategy::Sendmsg => Ok(()),
        other => Err(format!(
            "`strategy` {other} cannot carry `tls`: it hands the kernel pages to send as they are, and only kernel TLS (kTLS) could encrypt them; use `strategy` write, single, writev or sendmsg with `tls`"
        )),
    }
}

/// One end of a TLS connection over a blocking TCP socket with tick timeouts.
pub struct TlsStream {
    conn: rustls::Connection,
    /// Bytes read from the socket that rustls has not taken yet: `inbuf[pos..len]`.
    inbuf: Vec<u8>,
    pos: usize,
    len: usize,
    /// `read()` calls on the socket that returned data.
    pub socket_reads: u64,
    /// `writev()` calls on the socket that moved bytes.
    pub socket_writes: u64,
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("handshaking", &self.conn.is_handshaking())
            .field("socket_reads", &self.socket_reads)
            .field("socket_writes", &self.socket_writes)
            .finish()
    }
}

/// A rustls error as an I/O error (kept whole: it names what the peer did).
fn tls_err(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl TlsStream {
    /// A client end (SNI `localhost`: the certificate is checked by pin or CA, see
    /// [`socklab_tls::Trust`]); reads of up to `read_size` bytes.
    pub fn client(cfg: Arc<rustls::ClientConfig>, read_size: usize) -> io::Result<TlsStream> {
        let name = ServerName::try_from("localhost").map_err(io::Error::other)?;
        let conn = rustls::ClientConnection::new(cfg, name).map_err(tls_err)?;
        Ok(Self::new(conn.into(), read_size))
    }

    /// A server end; reads of up to `read_size` bytes.
    pub fn server(cfg: Arc<rustls::ServerConfig>, read_size: usize) -> io::Result<TlsStream> {
        let conn = rustls::ServerConnection::new(cfg).map_err(tls_err)?;
        Ok(Self::new(conn.into(), read_size))
    }

    fn new(mut conn: rustls::Connection, read_size: usize) -> TlsStream {
        conn.set_buffer_limit(Some(BUFFER_LIMIT));
        TlsStream {
            conn,
            // At least one whole record, so a read never returns less than rustls needs.
            inbuf: vec![0; read_size.max(18 << 10)],
            pos: 0,
            len: 0,
            socket_reads: 0,
            socket_writes: 0,
        }
    }

    /// The version and cipher suite, once the handshake is done.
    pub fn negotiated(&self) -> Negotiated {
        match &self.conn {
            rustls::Connection::Client(c) => Negotiated::of(c),
            rustls::Connection::Server(s) => Negotiated::of(s),
        }
    }

    /// Drives the handshake to its end (this end's last flight flushed). A call without
    /// progress asks `wait`; the peer closing first is `UnexpectedEof`, a peer that does not
    /// speak TLS (or fails the certificate check) `InvalidData` with rustls' reason.
    pub fn handshake(&mut self, sock: &TcpStream, wait: &mut dyn Policy) -> io::Result<()> {
        let mut since: Option<Instant> = None;
        while self.conn.is_handshaking() {
            if self.conn.wants_write() {
                self.flush(sock, wait)?;
                continue;
            }
            match self.pull(sock) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the connection during the TLS handshake",
                    ))
                }
                Ok(_) => {
                    since = None;
                    wait.moved(0)?;
                }
                Err(e) if is_no_progress(&e) => {
                    wait.stalled(e, *since.get_or_insert_with(Instant::now))?
                }
                Err(e) => {
                    // Best effort: the alert rustls queued tells the peer why.
                    let _ = self.conn.write_tls(&mut &*sock);
                    return Err(e);
                }
            }
        }
        self.flush(sock, wait).map(drop)
    }

    /// Reads once from the socket (when rustls has taken everything read before) and hands
    /// the bytes to rustls: `Ok(0)` at the socket's end of stream, the tick timeout as
    /// `WouldBlock`/`TimedOut`.
    fn pull(&mut self, sock: &TcpStream) -> io::Result<usize> {
        if self.pos == self.len {
            let n = (&*sock).read(&mut self.inbuf)?;
            if n == 0 {
                // rustls learns of the end: a later read says whether it was clean.
                self.conn.read_tls(&mut io::empty())?;
                self.conn.process_new_packets().map_err(tls_err)?;
                return Ok(0);
            }
            self.socket_reads += 1;
            (self.pos, self.len) = (0, n);
        }
        let mut rest = &self.inbuf[self.pos..self.len];
        let took = self.conn.read_tls(&mut rest)?;
        self.pos += took;
        self.conn.process_new_packets().map_err(tls_err)?;
        Ok(took.max(1))
    }

    /// One read of plaintext into `buf`: `Ok(0)` at the peer's `close_notify`, the tick
    /// timeout as `WouldBlock`/`TimedOut` (nothing is lost: call again), `UnexpectedEof` when
    /// the peer closed without `close_notify`.
    pub fn read(&mut self, sock: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if self.pull(sock)? == 0 {
                // The end: the reader now says clean (`Ok(0)`) or truncated.
                return self.conn.reader().read(buf);
            }
        }
    }

    /// [`Self::read`] without the copy: hands the plaintext at hand (up to a record or so)
    /// to `f` where rustls holds it, for a receiver that only counts and hashes. Returns the
    /// bytes handed over; `Ok(0)` and the errors as [`Self::read`].
    pub fn read_in_place(
        &mut self,
        sock: &TcpStream,
        f: &mut dyn FnMut(&[u8]),
    ) -> io::Result<usize> {
        use std::io::BufRead;
        let mut eof = false;
        loop {
            let mut reader = self.conn.reader();
            match reader.fill_buf() {
                Ok([]) => return Ok(0),
                Ok(data) => {
                    let n = data.len();
                    f(data);
                    reader.consume(n);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && eof => {
                    return Err(io::ErrorKind::UnexpectedEof.into())
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            eof = self.pull(sock)? == 0;
        }
    }

    /// Encrypts `chunks` (records never span two chunks) and flushes them; returns the
    /// `writev()` calls made.
    pub fn write_chunks<'a>(
        &mut self,
        sock: &TcpStream,
        chunks: impl IntoIterator<Item = &'a [u8]>,
        wait: &mut dyn Policy,
    ) -> io::Result<u64> {
        let mut calls = 0;
        for chunk in chunks {
            let mut off = 0;
            while off < chunk.len() {
                let n = self.conn.writer().write(&chunk[off..])?;
                off += n;
                if off < chunk.len() {
                    // rustls holds BUFFER_LIMIT: send some before encrypting more.
                    calls += self.flush(sock, wait)?;
                }
            }
        }
        Ok(calls + self.flush(sock, wait)?)
    }

    /// One round of `payload` the way `strategy` writes it (see the module's doc); returns
    /// the `writev()` calls made.
    pub fn round(
        &mut self,
        sock: &TcpStream,
        payload: &Payload,
        strategy: Strategy,
        wait: &mut dyn Policy,
    ) -> io::Result<u64> {
        match strategy {
            Strategy::Write => {
                let mut calls = 0;
                for i in 0..payload.nbufs() {
                    calls += self.write_chunks(sock, [payload.buf(i)], wait)?;
                }
                Ok(calls)
            }
            Strategy::Single => self.write_chunks(sock, [payload.round()], wait),
            Strategy::Writev | Strategy::Sendmsg => {
                self.write_chunks(sock, (0..payload.nbufs()).map(|i| payload.buf(i)), wait)
            }
            other => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                user_space_capable(other).err().unwrap_or_default(),
            )),
        }
    }

    /// Sends `close_notify` (the clean end of this direction); the caller's FIN follows.
    pub fn close(&mut self, sock: &TcpStream, wait: &mut dyn Policy) -> io::Result<()> {
        self.conn.send_close_notify();
        self.flush(sock, wait).map(drop)
    }

    /// Writes every encrypted byte rustls holds; returns the calls that moved bytes.
    fn flush(&mut self, sock: &TcpStream, wait: &mut dyn Policy) -> io::Result<u64> {
        let mut calls = 0;
        let mut since: Option<Instant> = None;
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut &*sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    calls += 1;
                    self.socket_writes += 1;
                    since = None;
                    wait.moved(n)?;
                }
                Err(e) if is_no_progress(&e) => {
                    wait.stalled(e, *since.get_or_insert_with(Instant::now))?
                }
                Err(e) => return Err(e),
            }
        }
        Ok(calls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socklab_tls::{client_config, server_config, Identity, TlsVersion, Trust};
    use std::net::TcpListener;
    use std::sync::LazyLock;
    use std::time::Duration;

    static IDENTITY: LazyLock<Identity> = LazyLock::new(|| Identity::self_signed(&[]).unwrap());
    static SERVER: LazyLock<Arc<rustls::ServerConfig>> =
        LazyLock::new(|| server_config(&IDENTITY, TlsVersion::Tls13, &[]).unwrap());

    fn patient(e: io::Error, since: Instant) -> io::Result<()> {
        if since.elapsed() > Duration::from_secs(10) {
            Err(e)
        } else {
            Ok(())
        }
    }

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        for x in [&c, &s] {
            x.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            x.set_write_timeout(Some(Duration::from_millis(100)))
                .unwrap();
        }
        (c, s)
    }

    /// Reads to the end: the bytes, and how the stream ended.
    fn drain(t: &mut TlsStream, s: &TcpStream) -> (Vec<u8>, io::Result<()>) {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match t.read(s, &mut buf) {
                Ok(0) => return (got, Ok(())),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if is_no_progress(&e) => {}
                Err(e) => return (got, Err(e)),
            }
        }
    }

    /// Every strategy that can carry TLS moves the payload byte for byte, ends with a clean
    /// `close_notify`, and counts its system calls; the others are refused by name.
    #[test]
    fn rounds_arrive_byte_for_byte_and_end_cleanly() {
        let ccfg = client_config(
            &Trust::Pinned(IDENTITY.fingerprint()),
            TlsVersion::Tls13,
            &[],
        )
        .unwrap();
        for strategy in [
            Strategy::Write,
            Strategy::Single,
            Strategy::Writev,
            Strategy::Sendmsg,
        ] {
            let payload = Payload::new(3, 20_000, 7);
            let expected: Vec<u8> = (0..3).flat_map(|_| payload.round().to_vec()).collect();
            let (c, s) = pair();
            let reader = std::thread::spawn(move || {
                let mut t = TlsStream::server(SERVER.clone(), 64 << 10).unwrap();
                t.handshake(&s, &mut patient).unwrap();
                let (got, end) = drain(&mut t, &s);
                end.unwrap();
                (got, t.socket_reads, t.negotiated())
            });
            let mut t = TlsStream::client(ccfg.clone(), 64 << 10).unwrap();
            t.handshake(&c, &mut patient).unwrap();
            let mut calls = 0;
            for _ in 0..3 {
                calls += t.round(&c, &payload, strategy, &mut patient).unwrap();
            }
            t.close(&c, &mut patient).unwrap();
            c.shutdown(std::net::Shutdown::Write).unwrap();
            let (got, reads, neg) = reader.join().unwrap();
            assert!(got == expected, "{strategy}: the bytes differ");
            let least = if strategy == Strategy::Write { 9 } else { 3 };
            assert!(
                calls >= least && reads >= 1,
                "{strategy}: {calls} writes, {reads} reads"
            );
            assert_eq!(neg.version, "1.3");
        }
        let e = user_space_capable(Strategy::Sendfile).unwrap_err();
        assert!(e.contains("`strategy` sendfile cannot carry `tls`"), "{e}");
        let (c, _s) = pair();
        let mut t = TlsStream::client(ccfg, 1024).unwrap();
        let e = t.round(&c, &Payload::new(1, 10, 1), Strategy::Splice, &mut patient);
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::Unsupported);
    }

    /// A peer that closes without `close_notify` is a truncated stream, not a clean end; a
    /// peer that sends plain text fails the handshake with rustls' reason.
    #[test]
    fn truncation_and_plain_text_are_errors() {
        let ccfg = client_config(&Trust::Unverified, TlsVersion::Tls13, &[]).unwrap();
        let (c, s) = pair();
        let server = std::thread::spawn(move || {
            let mut t = TlsStream::server(SERVER.clone(), 16 << 10).unwrap();
            t.handshake(&s, &mut patient).unwrap();
            let (got, end) = drain(&mut t, &s);
            (got, end.map_err(|e| e.kind()))
        });
        let mut t = TlsStream::client(ccfg, 16 << 10).unwrap();
        t.handshake(&c, &mut patient).unwrap();
        t.write_chunks(&c, [&b"abc"[..]], &mut patient).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let (got, end) = server.join().unwrap();
        assert_eq!(got, b"abc");
        assert_eq!(end, Err(io::ErrorKind::UnexpectedEof));

        let (c, s) = pair();
        io::Write::write_all(&mut &c, b"SOCKLAB JOIN/2 test=1 index=0\n").unwrap();
        let mut t = TlsStream::server(SERVER.clone(), 16 << 10).unwrap();
        let e = t.handshake(&s, &mut patient).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    }
}
