//! [`Config`]: the settings of a connection, and their check.

use crate::error::ConfigError;
use crate::wire;

/// Settings of a connection. Both ends use the same type.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Largest UDP payload sent (bytes). At least 1200.
    pub max_datagram: usize,
    /// Receive window: stream bytes the peer may have sent beyond what was read.
    pub recv_window: u64,
    /// Send buffer: bytes written and not yet acknowledged.
    pub send_buffer: usize,
    /// RTT assumed before the first sample (ns).
    pub initial_rtt_ns: u64,
    /// The connection closes when nothing arrives for this long (ns).
    pub idle_timeout_ns: u64,
    /// Longest the receiver delays an ACK (ns).
    pub max_ack_delay_ns: u64,
    /// An ACK goes out at least every this many ack-eliciting packets.
    pub ack_every: u32,
    /// Initial congestion window in packets.
    pub initial_window_packets: u64,
    /// Optional cap on the pacing rate (bytes per second).
    pub max_rate: Option<u64>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_datagram: 1472,
            recv_window: 32 << 20,
            send_buffer: 32 << 20,
            initial_rtt_ns: 100_000_000,
            idle_timeout_ns: 10_000_000_000,
            max_ack_delay_ns: 5_000_000,
            ack_every: 4,
            initial_window_packets: 10,
            max_rate: None,
        }
    }
}

impl Config {
    /// Checks the settings; the error names the bad value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(wire::MIN_INITIAL_SIZE..=65_507).contains(&self.max_datagram) {
            return Err(ConfigError::MaxDatagram(self.max_datagram));
        }
        if self.recv_window < 65_536 || self.send_buffer < 65_536 {
            return Err(ConfigError::BuffersTooSmall {
                recv_window: self.recv_window,
                send_buffer: self.send_buffer,
            });
        }
        if self.ack_every == 0 || self.initial_window_packets == 0 {
            return Err(ConfigError::ZeroCount {
                ack_every: self.ack_every,
                initial_window_packets: self.initial_window_packets,
            });
        }
        if self.idle_timeout_ns < 1_000_000 || self.initial_rtt_ns == 0 {
            return Err(ConfigError::Timing {
                idle_timeout_ns: self.idle_timeout_ns,
                initial_rtt_ns: self.initial_rtt_ns,
            });
        }
        Ok(())
    }
}
