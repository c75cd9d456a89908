//! `socklab-transfer`: the file-transfer application layer of `socklab transfer`, shared by
//! both transports (TCP and socklab's reliable UDP, `socklab-rudp`).
//!
//! Both transports carry *chunks* `(stream, offset, bytes)`. Over our reliable UDP transport
//! (rudp) chunks arrive reliably but unordered, possibly split differently from how they were
//! sent; over TCP the same chunks are framed in the byte stream ([`framing`]).
//!
//! Client → server:
//! - stream 0 carries the encoded [`Manifest`] at offsets `0..`;
//! - stream `i + 1` carries the bytes of file `i` at the file's own offsets.
//!
//! Server → client: stream 0 carries an ordered sequence of [`Control`] records (`Resume`,
//! `Verdict`, `Done`, or `Abort` when the server gives up), at increasing offsets.
//!
//! The pieces, all sans-IO except [`tcp`]:
//! - [`manifest`] — the file list with sizes and BLAKE3 hashes, and name validation;
//! - [`control`] — the server's control records;
//! - [`reassembly`] — [`Ordered`] (unordered chunks in, contiguous prefix out) and [`RangeSet`];
//! - [`receiver`] — [`FileReceiver`]: writes files safely inside a directory, resumes, verifies;
//! - [`limits`] — [`ReceiveLimits`]: what a server lets clients cost it (memory before the
//!   manifest, file sizes, free space), and [`reclaim_partials`];
//! - [`sender`] — [`FileSender`]: produces the chunks to send and follows the server's messages;
//! - [`sessions`] — the rudp server's session limits, eviction policy and log of ended sessions;
//! - [`framing`] — the TCP framing of chunks;
//! - [`tcp`] — the TCP baseline end to end ([`serve_tcp`], [`send_tcp`]);
//! - [`quic`] — QUIC (quinn) end to end, one QUIC stream per file ([`quic::serve_quic`], [`quic::send_quic`]);
//! - [`workfiles`] — deterministic workload files for experiments and tests.

pub mod control;
mod early;
pub mod error;
pub mod framing;
pub mod limits;
pub mod manifest;
pub mod path_mtu;
pub mod quic;
pub mod reassembly;
pub mod receiver;
pub mod rudp;
pub mod sender;
pub mod sessions;
pub mod tcp;
pub mod workfiles;

pub use control::{Control, ControlDecoder};
pub use error::{ParseProtoError, TransferError};
pub use framing::{Frame, FrameDecoder};
pub use limits::{reclaim_partials, MemoryBudget, ReceiveLimits, Reclaimed};
pub use manifest::{check_name, Entry, Manifest};
pub use reassembly::{Ordered, RangeSet};
pub use receiver::FileReceiver;
pub use rudp::{send_rudp, serve_rudp, serve_rudp_with, RudpReport};
pub use sender::FileSender;
pub use sessions::{SessionLimits, SessionLog};
pub use tcp::{send_tcp, serve_tcp, serve_tcp_with, ServerSession, TcpReport, TcpServeOptions};

/// The transport of a file transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// One persistent TCP connection.
    Tcp,
    /// socklab's reliable transport over UDP.
    Rudp,
    /// QUIC (quinn), one QUIC stream per file.
    Quic,
}

impl Proto {
    /// The name used in parameters and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Rudp => "rudp",
            Proto::Quic => "quic",
        }
    }
}

impl std::str::FromStr for Proto {
    type Err = ParseProtoError;
    fn from_str(s: &str) -> Result<Proto, ParseProtoError> {
        match s.trim() {
            "tcp" => Ok(Proto::Tcp),
            "rudp" => Ok(Proto::Rudp),
            "quic" => Ok(Proto::Quic),
            _ => Err(ParseProtoError {
                value: s.to_string(),
            }),
        }
    }
}

/// What the client of either transport measured.
#[derive(Debug, Clone)]
pub enum TransferReport {
    /// [`send_tcp`]'s report.
    Tcp(TcpReport),
    /// [`send_rudp`]'s report.
    Rudp(RudpReport),
    /// [`quic::send_quic`]'s report.
    Quic(quic::QuicReport),
}

impl TransferReport {
    /// Nanoseconds from the start of the connection until `Done` arrived.
    pub fn total_ns(&self) -> u64 {
        match self {
            TransferReport::Tcp(r) => r.total_ns,
            TransferReport::Rudp(r) => r.total_ns,
            TransferReport::Quic(r) => r.total_ns,
        }
    }

    /// File bytes in the manifest.
    pub fn bytes(&self) -> u64 {
        match self {
            TransferReport::Tcp(r) => r.bytes,
            TransferReport::Rudp(r) => r.bytes,
            TransferReport::Quic(r) => r.bytes,
        }
    }

    /// Per-file outcomes.
    pub fn files(&self) -> &[FileOutcome] {
        match self {
            TransferReport::Tcp(r) => &r.files,
            TransferReport::Rudp(r) => &r.files,
            TransferReport::Quic(r) => &r.files,
        }
    }

    /// Retransmissions while each file was being sent (TCP: segments; rudp: packets).
    pub fn per_file_retransmits(&self) -> &[u64] {
        match self {
            TransferReport::Tcp(r) => &r.per_file_retransmits,
            TransferReport::Rudp(r) => &r.per_file_retransmits,
            TransferReport::Quic(r) => &r.per_file_retransmits,
        }
    }
}

/// Sends `paths` to the server at `to` over `proto` (TCP with congestion control `tcp_cc` if
/// given; rudp with its default settings, its datagrams as large as the loopback MTU carries
/// when `to` is a loopback address: [`path_mtu`]; QUIC with quinn's controller `tcp_cc` names,
/// checking the server's certificate as `quic_trust` says, unverified when `None`).
pub fn send(
    proto: Proto,
    to: std::net::SocketAddr,
    paths: &[std::path::PathBuf],
    tcp_cc: Option<&str>,
    timeout: std::time::Duration,
    quic_trust: Option<socklab_tls::Trust>,
) -> Result<TransferReport, TransferError> {
    match proto {
        Proto::Tcp => send_tcp(to, paths, tcp_cc, timeout).map(TransferReport::Tcp),
        Proto::Rudp => {
            let mut config = socklab_rudp::Config::default();
            config.max_datagram = path_mtu::datagram_size(to, config.max_datagram);
            send_rudp(to, paths, &config, timeout).map(TransferReport::Rudp)
        }
        Proto::Quic => {
            let cc = match tcp_cc {
                Some(c) => c.parse().map_err(TransferError::Invalid)?,
                None => quic::QuicCc::default(),
            };
            let opts = quic::QuicSendOptions {
                cc,
                trust: quic_trust.unwrap_or(socklab_tls::Trust::Unverified),
            };
            quic::send_quic(to, paths, &opts, timeout).map(TransferReport::Quic)
        }
    }
}

/// What became of one file, as one side saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOutcome {
    /// The file's name in the manifest.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// True when the server verified the file and stored it under its final name.
    pub ok: bool,
    /// The server's verdict text (or why there is none yet).
    pub detail: String,
    /// Bytes not sent because the server already had them from an earlier, interrupted
    /// transfer (on the server: bytes recovered from the partial file).
    pub skipped_bytes: u64,
}

/// Reads little-endian integers from a byte slice, failing cleanly at the end.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, what }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], TransferError> {
        if self.buf.len() < n {
            return Err(TransferError::Protocol(format!(
                "{} truncated: needs {n} more bytes, has {}",
                self.what,
                self.buf.len()
            )));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], TransferError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, TransferError> {
        Ok(self.bytes(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, TransferError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, TransferError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, TransferError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

/// Hex of a BLAKE3 hash.
pub(crate) fn hex(hash: &[u8; 32]) -> String {
    blake3::Hash::from(*hash).to_hex().to_string()
}

#[cfg(test)]
pub(crate) mod testutil {
    //! A small deterministic PRNG for shuffling chunks in tests.

    /// splitmix64.
    #[derive(Debug)]
    pub struct Rng(pub u64);

    impl Rng {
        pub fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// Uniform in `0..n` (n > 0).
        pub fn below(&mut self, n: u64) -> u64 {
            self.next_u64() % n
        }

        pub fn shuffle<T>(&mut self, v: &mut [T]) {
            for i in (1..v.len()).rev() {
                let j = self.below(i as u64 + 1) as usize;
                v.swap(i, j);
            }
        }

        pub fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next_u64() as u8).collect()
        }
    }
}
