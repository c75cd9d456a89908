//! The sink: a TCP server that reads and counts (`socklab sink`).
//!
//! It serves clients one after another, forever: a socklab client gets its counts back over the
//! same connection (see [`crate::protocol`]); a raw client (`nc`, `dd | nc`) is simply counted.
//! A client that dies mid-stream, stalls past the idle timeout or breaks the protocol costs only
//! its own connection; the sink goes on serving.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use socklab_sys::errno;
use socklab_sys::usage::{getrusage, Who};

use crate::aligned::AlignedBuf;
use crate::error::{is_timeout, is_transient_accept_error};
use crate::protocol::{Hello, Ready, SinkResult, MAGIC, MAX_LINE};
use crate::NetError;

/// How the sink listens and reads.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// Where to listen. `[::]:port` listens dual-stack.
    pub bind: SocketAddr,
    /// Bytes per `read()` for raw clients (socklab clients choose their own).
    pub read_size: usize,
    /// A connection silent for this long is dropped.
    pub idle_timeout: Duration,
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig {
            bind: SocketAddr::from(([0u16; 8], 5001)),
            read_size: 128 * 1024,
            idle_timeout: Duration::from_secs(30),
        }
    }
}

/// How a connection was spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The socklab protocol: counts were sent back.
    Socklab,
    /// A raw byte stream: counted only.
    Raw,
}

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Clean end of stream.
    Complete,
    /// The client reset the connection or vanished mid-stream.
    Aborted(String),
    /// Silent for longer than the idle timeout.
    IdleTimeout,
    /// The client broke the protocol; the reason was sent to it.
    Refused(String),
}

/// What the sink saw on one connection.
#[derive(Debug, Clone)]
pub struct ConnReport {
    /// The client.
    pub peer: SocketAddr,
    /// Protocol spoken.
    pub mode: Mode,
    /// Counts (bytes, reads, CPU, elapsed, hash).
    pub result: SinkResult,
    /// How it ended.
    pub outcome: Outcome,
}

impl ConnReport {
    /// One human line for the sink's log.
    pub fn line(&self) -> String {
        let secs = self.result.elapsed_ns as f64 / 1e9;
        let gbps = if secs > 0.0 {
            self.result.bytes as f64 * 8.0 / secs / 1e9
        } else {
            0.0
        };
        let how = match &self.outcome {
            Outcome::Complete => "complete".to_string(),
            Outcome::Aborted(e) => format!("aborted ({e})"),
            Outcome::IdleTimeout => "idle timeout".to_string(),
            Outcome::Refused(e) => format!("refused ({e})"),
        };
        format!(
            "{} {}: {} bytes in {} reads, {:.3} s, {:.3} Gbit/s, {}",
            self.peer,
            match self.mode {
                Mode::Socklab => "socklab",
                Mode::Raw => "raw",
            },
            self.result.bytes,
            self.result.reads,
            secs,
            gbps,
            how
        )
    }
}

/// A bound sink.
#[derive(Debug)]
pub struct Sink {
    listener: TcpListener,
    cfg: SinkConfig,
    buf: AlignedBuf,
}

/// Creates a listening TCP socket: `SO_REUSEADDR`, dual-stack for `[::]`, backlog 1024.
pub fn listen(addr: SocketAddr) -> Result<TcpListener, NetError> {
    let err = |source: io::Error| NetError::bind(addr, source);
    let sock =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(err)?;
    sock.set_reuse_address(true).map_err(err)?;
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        sock.set_only_v6(false).map_err(err)?;
    }
    sock.bind(&addr.into()).map_err(err)?;
    sock.listen(1024).map_err(err)?;
    Ok(sock.into())
}

impl Sink {
    /// Binds the listening socket. For the default dual-stack address it falls back to IPv4
    /// where the host has no IPv6.
    pub fn bind(cfg: SinkConfig) -> Result<Sink, NetError> {
        if cfg.read_size == 0 || cfg.read_size > crate::protocol::MAX_READ_SIZE {
            return Err(NetError::Invalid(format!(
                "--read-size {} is out of range: use 1 to 64M",
                cfg.read_size
            )));
        }
        let listener = match listen(cfg.bind) {
            Err(NetError::Bind { source, .. })
                if cfg.bind.is_ipv6()
                    && cfg.bind.ip().is_unspecified()
                    && source.raw_os_error() == Some(errno::EAFNOSUPPORT) =>
            {
                listen(SocketAddr::from(([0, 0, 0, 0], cfg.bind.port())))?
            }
            other => other?,
        };
        Ok(Sink {
            listener,
            cfg,
            buf: AlignedBuf::zeroed(0),
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves connections one after another until `stop()` returns true (checked at least
    /// every 200 ms while idle), calling `log` after each connection.
    pub fn serve(
        &mut self,
        stop: &dyn Fn() -> bool,
        log: &mut dyn FnMut(&ConnReport),
    ) -> Result<(), NetError> {
        use socklab_sys::io::{poll_flags, poll_one};
        loop {
            if stop() {
                return Ok(());
            }
            let ready = poll_one(self.listener.as_fd(), poll_flags::IN, 200)
                .map_err(|e| NetError::io("poll on the listening socket", e))?;
            if ready == 0 {
                continue;
            }
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    let report = self.serve_conn(stream, peer);
                    log(&report);
                }
                // Out of descriptors or a client that vanished before accept: keep serving.
                Err(e) if is_transient_accept_error(&e) => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(NetError::io("accept", e)),
            }
        }
    }

    /// Accepts and serves exactly one connection (blocking).
    pub fn serve_one(&mut self) -> Result<ConnReport, NetError> {
        let (stream, peer) = self
            .listener
            .accept()
            .map_err(|e| NetError::io("accept", e))?;
        Ok(self.serve_conn(stream, peer))
    }

    fn serve_conn(&mut self, mut stream: TcpStream, peer: SocketAddr) -> ConnReport {
        let cpu0 = getrusage(Who::Thread);
        let mut t0 = Instant::now();
        let mut result = SinkResult::default();
        let _ = stream.set_read_timeout(Some(self.cfg.idle_timeout));
        let _ = stream.set_write_timeout(Some(self.cfg.idle_timeout));

        // Sniff: a socklab client sends one control line and waits for READY.
        let mut head = Vec::with_capacity(64);
        let mut byte_buf = [0u8; MAX_LINE];
        let mut mode = Mode::Raw;
        let mut hello = None;
        let sniff = loop {
            match stream.read(&mut byte_buf[..MAX_LINE - head.len()]) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    result.reads += 1;
                    head.extend_from_slice(&byte_buf[..n]);
                    let k = head.len().min(MAGIC.len());
                    if head[..k] != MAGIC.as_bytes()[..k] {
                        break Ok(()); // raw stream
                    }
                    if let Some(nl) = head.iter().position(|&b| b == b'\n') {
                        let line = String::from_utf8_lossy(&head[..nl]).into_owned();
                        if nl + 1 != head.len() {
                            break Err("data before READY".to_string());
                        }
                        match Hello::parse(&line) {
                            Ok(h) => {
                                mode = Mode::Socklab;
                                hello = Some(h);
                                break Ok(());
                            }
                            Err(e) => break Err(e),
                        }
                    }
                    if head.len() >= MAX_LINE {
                        break Err(format!("control line longer than {MAX_LINE} bytes"));
                    }
                }
                Err(e) => {
                    return self.finish(stream, peer, mode, result, cpu0, t0, conn_error(&e), None);
                }
            }
        };
        if let Err(reason) = sniff {
            let _ = stream.write_all(format!("ERROR {reason}\n").as_bytes());
            return self.finish(
                stream,
                peer,
                Mode::Socklab,
                result,
                cpu0,
                t0,
                Outcome::Refused(reason),
                None,
            );
        }

        let (read_size, mut hasher) = match &hello {
            Some(h) => {
                result.reads = 0;
                let rcvbuf = SockRef::from(&stream).recv_buffer_size().unwrap_or(0);
                let ready = Ready {
                    read_size: h.read_size,
                    rcvbuf,
                };
                if let Err(e) = stream.write_all(ready.emit().as_bytes()) {
                    return self.finish(stream, peer, mode, result, cpu0, t0, conn_error(&e), None);
                }
                t0 = Instant::now();
                (h.read_size, h.verify.then(blake3::Hasher::new))
            }
            None => {
                result.bytes = head.len() as u64;
                if head.is_empty() {
                    // Connected and closed without a byte.
                    return self.finish(
                        stream,
                        peer,
                        mode,
                        result,
                        cpu0,
                        t0,
                        Outcome::Complete,
                        None,
                    );
                }
                (self.cfg.read_size, None)
            }
        };

        if self.buf.len() != read_size {
            self.buf = AlignedBuf::zeroed(read_size);
        }
        let outcome = loop {
            match stream.read(self.buf.as_mut_slice()) {
                Ok(0) => break Outcome::Complete,
                Ok(n) => {
                    result.reads += 1;
                    result.bytes += n as u64;
                    if let Some(h) = hasher.as_mut() {
                        h.update(&self.buf.as_slice()[..n]);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break conn_error(&e),
            }
        };
        self.finish(stream, peer, mode, result, cpu0, t0, outcome, hasher)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        mut stream: TcpStream,
        peer: SocketAddr,
        mode: Mode,
        mut result: SinkResult,
        cpu0: socklab_sys::usage::Usage,
        t0: Instant,
        outcome: Outcome,
        hasher: Option<blake3::Hasher>,
    ) -> ConnReport {
        result.elapsed_ns = t0.elapsed().as_nanos() as u64;
        let cpu = getrusage(Who::Thread).since(&cpu0);
        result.user_us = cpu.user.as_micros() as u64;
        result.sys_us = cpu.sys.as_micros() as u64;
        result.hash = hasher.map(|h| h.finalize().to_hex().to_string());
        if mode == Mode::Socklab && outcome == Outcome::Complete {
            // Best effort: a client that already left gets EPIPE, which we ignore.
            let _ = stream.write_all(result.emit().as_bytes());
        }
        ConnReport {
            peer,
            mode,
            result,
            outcome,
        }
    }
}

fn conn_error(e: &io::Error) -> Outcome {
    if is_timeout(e) {
        Outcome::IdleTimeout
    } else {
        Outcome::Aborted(e.to_string())
    }
}
