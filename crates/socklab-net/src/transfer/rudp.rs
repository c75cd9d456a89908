//! The rudp side of `socklab transfer`: the socket drivers of the sans-IO transport
//! ([`socklab_rudp`]) carrying the file-transfer application ([`FileSender`], [`FileReceiver`]).
//!
//! Client: stream 0 carries the manifest, stream `i + 1` the bytes of file `i`; the server's
//! control records come back on its stream 0. The client finishes when `Done` arrives with every
//! verdict ok, then closes the connection.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::{FileOutcome, ServerSession};
use crate::TransferError;

/// What one rudp transfer measured on the client.
#[derive(Debug, Clone)]
pub struct RudpReport {
    /// Nanoseconds from the first Initial until `Done` arrived.
    pub total_ns: u64,
    /// File bytes in the manifest.
    pub bytes: u64,
    /// File bytes actually sent (the rest the server had from an earlier transfer).
    pub sent_bytes: u64,
    /// Per-file outcomes (all ok when this report is returned).
    pub files: Vec<FileOutcome>,
    /// Packets that carried retransmitted data of each file, in manifest order.
    pub per_file_retransmits: Vec<u64>,
    /// The client connection's counters and estimates at the end.
    pub stats: socklab_rudp::Stats,
}

/// Sends `paths` to the rudp transfer server at `to`. Fails when a file's verdict is not ok,
/// the server aborts, the connection closes, or `timeout` passes (counted from the first
/// Initial; hashing the files before that is not counted).
pub fn send_rudp(
    to: SocketAddr,
    paths: &[PathBuf],
    config: &socklab_rudp::Config,
    timeout: Duration,
) -> Result<RudpReport, TransferError> {
    let _ = (to, paths, config, timeout);
    Err(TransferError::Invalid("rudp client: being written".into()))
}

/// Serves rudp transfers on `socket` into `dir` until `stop` is set (checked at least every
/// 100 ms) or, with `once`, after the first session ends. Several clients may transfer at once.
/// A failed session is reported in its [`ServerSession::error`]; only socket errors are returned.
pub fn serve_rudp(
    socket: UdpSocket,
    dir: &Path,
    config: &socklab_rudp::Config,
    stop: &AtomicBool,
    once: bool,
) -> Result<Vec<ServerSession>, TransferError> {
    let _ = (socket, dir, config, stop, once);
    Err(TransferError::Invalid("rudp server: being written".into()))
}
