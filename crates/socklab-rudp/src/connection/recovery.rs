//! Loss recovery (RFC 9002): the record of sent packets, ACK processing and delivery-rate
//! samples, RTT estimation, loss detection by packet and time thresholds with an adaptive
//! reordering window (spurious losses widen it), and the probe timeout with its last-resort
//! persistent congestion.

use crate::cc::AckSample;
use crate::wire::Ack;

use super::send_buffer::DataRef;
use super::{Connection, Role};

const GRANULARITY_NS: u64 = 1_000_000;
const PACKET_THRESHOLD: u64 = 3;
/// Probe timeouts in a row after which everything in flight is declared lost.
const PERSISTENT_PTOS: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SentState {
    Outstanding,
    Acked,
    Lost,
    /// Not ack-eliciting: not tracked for loss.
    Untracked,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct SentPacket {
    pub(super) pn: u64,
    pub(super) time: u64,
    pub(super) size: u32,
    pub(super) state: SentState,
    pub(super) data: Option<DataRef>,
    pub(super) credit: bool,
    /// Largest packet number of the ACK frame it carried.
    pub(super) ack_largest: Option<u64>,
    pub(super) delivered: u64,
    pub(super) delivered_time: u64,
    pub(super) first_sent_time: u64,
    pub(super) app_limited: bool,
}

impl Connection {
    pub(super) fn on_ack_frame(&mut self, now: u64, ack: &Ack<'_>) -> Result<(), String> {
        if ack.largest >= self.next_pn {
            return Err(format!(
                "ack of packet {} which was never sent",
                ack.largest
            ));
        }
        let base = self.sent.front().map_or(self.next_pn, |p| p.pn);
        let mut acked_bytes = 0u64;
        let mut newest: Option<SentPacket> = None;
        let mut largest_newly_acked = false;
        let prior_largest = self.largest_acked;
        for range in ack.ranges() {
            let (lo, hi) = (*range.start(), *range.end());
            let end = hi + 1;
            let start = lo.max(base);
            let mut pos = start;
            // ACK frames repeat their ranges until acknowledged: most ranges are already
            // known, and then one lookup is all they cost (no insert).
            let mut new_pns = false;
            while let Some(gap) = self.acked_pns.first_gap_in(pos..end) {
                new_pns = true;
                for pn in gap.clone() {
                    let idx = (pn - base) as usize;
                    let Some(p) = self.sent.get(idx).copied() else {
                        break;
                    };
                    match p.state {
                        SentState::Outstanding => {
                            self.sent[idx].state = SentState::Acked;
                            self.in_flight -= u64::from(p.size);
                            acked_bytes += u64::from(p.size);
                            self.delivered += u64::from(p.size);
                            if pn == ack.largest {
                                largest_newly_acked = true;
                            }
                            if prior_largest.is_some_and(|l| pn < l) {
                                self.reordering_seen = true;
                            }
                            self.on_packet_acked(&p);
                            if p.data.is_some() {
                                self.last_progress = now;
                            }
                            if newest.is_none_or(|n| p.pn > n.pn) {
                                newest = Some(p);
                            }
                        }
                        SentState::Lost => {
                            // Declared lost, yet it arrived: the "loss" was reordering.
                            self.sent[idx].state = SentState::Acked;
                            self.stats.spurious_losses += 1;
                            self.reordering_seen = true;
                            self.reo_mult = (self.reo_mult * 2).min(16);
                            self.spurious_round = self.cc.round();
                            self.on_packet_acked(&p);
                            if p.data.is_some() {
                                self.last_progress = now;
                            }
                        }
                        SentState::Untracked => {
                            self.sent[idx].state = SentState::Acked;
                            if let Some(l) = p.ack_largest {
                                self.on_ack_acked(l);
                            }
                        }
                        SentState::Acked => {}
                    }
                }
                pos = gap.end;
            }
            if new_pns {
                self.acked_pns.insert(start..end);
            }
        }
        self.largest_acked = Some(prior_largest.map_or(ack.largest, |l| l.max(ack.largest)));
        if largest_newly_acked {
            if let Some(p) = self.sent.get((ack.largest - base) as usize).copied() {
                let delay = (ack.delay_us.saturating_mul(1000)).min(self.config.max_ack_delay_ns);
                self.on_rtt_sample(now.saturating_sub(p.time), delay);
            }
        }
        if acked_bytes == 0 {
            // Nothing new for loss recovery (a repeated ACK); loss timers stay as they were.
            self.trim_sent(now);
            return Ok(());
        }
        self.pto_count = 0;
        let lost_bytes = self.detect_lost(now);
        // Delivery rate sample (draft-cheng-iccrg-delivery-rate-estimation).
        let mut rate = None;
        let mut app_limited = false;
        let mut packet_delivered = self.delivered;
        if let Some(p) = newest {
            self.delivered_time = now;
            self.first_sent_time = p.time;
            let send_elapsed = p.time.saturating_sub(p.first_sent_time);
            let ack_elapsed = now.saturating_sub(p.delivered_time);
            let interval = send_elapsed.max(ack_elapsed);
            let bytes = self.delivered - p.delivered;
            let min_rtt = if self.min_rtt == u64::MAX {
                0
            } else {
                self.min_rtt
            };
            if interval > 0 && interval >= min_rtt / 2 {
                rate = Some(bytes as f64 * 1e9 / interval as f64);
            }
            app_limited = p.app_limited;
            packet_delivered = p.delivered;
        }
        if self.app_limited_until > 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        let round_before = self.cc.round();
        self.cc.on_ack(
            now,
            &AckSample {
                acked_bytes,
                lost_bytes,
                delivery_rate: rate,
                app_limited,
                rtt_ns: largest_newly_acked.then_some(self.latest_rtt),
                packet_delivered,
                delivered: self.delivered,
                in_flight: self.in_flight,
            },
        );
        if self.cc.round() != round_before
            && self.reo_mult > 1
            && self.cc.round() >= self.spurious_round + 16
        {
            // No spurious loss for 16 rounds: shrink the reordering window again.
            self.reo_mult /= 2;
            self.spurious_round = self.cc.round();
        }
        self.trim_sent(now);
        Ok(())
    }

    fn on_packet_acked(&mut self, p: &SentPacket) {
        if let Some(l) = p.ack_largest {
            self.on_ack_acked(l);
        }
        if let Some(d) = p.data {
            self.on_data_acked(d);
        }
    }

    pub(super) fn on_rtt_sample(&mut self, rtt: u64, ack_delay: u64) {
        let rtt = rtt.max(1);
        self.latest_rtt = rtt;
        self.min_rtt = self.min_rtt.min(rtt);
        if !self.has_rtt {
            self.has_rtt = true;
            self.srtt = rtt;
            self.rttvar = rtt / 2;
            return;
        }
        let adjusted = if rtt >= self.min_rtt + ack_delay {
            rtt - ack_delay
        } else {
            rtt
        };
        let diff = self.srtt.abs_diff(adjusted);
        self.rttvar = (3 * self.rttvar + diff) / 4;
        self.srtt = (7 * self.srtt + adjusted) / 8;
    }

    pub(super) fn reorder_window(&self) -> u64 {
        let rtt = self.srtt.max(self.latest_rtt);
        let base = if self.reordering_seen {
            (self.reo_mult * rtt / 8).min(2 * rtt)
        } else {
            rtt / 8
        };
        base.max(GRANULARITY_NS)
    }

    /// Declares lost what the thresholds say is lost; sets the loss timer for the rest.
    /// Returns the bytes declared lost.
    pub(super) fn detect_lost(&mut self, now: u64) -> u64 {
        self.loss_time = None;
        let Some(largest) = self.largest_acked else {
            return 0;
        };
        let loss_delay = self.srtt.max(self.latest_rtt) + self.reorder_window();
        let mut lost_bytes = 0;
        let mut i = self.first_outstanding;
        while let Some(p) = self.sent.get(i).copied() {
            if p.pn >= largest {
                break;
            }
            if p.state == SentState::Outstanding {
                let by_count = !self.reordering_seen && largest - p.pn >= PACKET_THRESHOLD;
                let by_time = now >= p.time + loss_delay;
                if by_count || by_time {
                    lost_bytes += u64::from(p.size);
                    self.declare_lost(i);
                } else {
                    self.loss_time = Some(p.time + loss_delay);
                    break;
                }
            }
            i += 1;
        }
        lost_bytes
    }

    fn declare_lost(&mut self, idx: usize) {
        let p = self.sent[idx];
        self.sent[idx].state = SentState::Lost;
        self.in_flight -= u64::from(p.size);
        self.stats.lost_packets += 1;
        if let Some(d) = p.data {
            self.retx.push_back(d);
        }
        if p.credit {
            self.credit_pending = true;
        }
    }

    /// Drops bookkeeping of packets nothing will ask about any more.
    pub(super) fn trim_sent(&mut self, now: u64) {
        let keep_lost = 4 * self.srtt.max(self.latest_rtt) + self.reorder_window();
        while let Some(p) = self.sent.front() {
            let done = match p.state {
                SentState::Acked | SentState::Untracked => true,
                SentState::Lost => now >= p.time + keep_lost,
                SentState::Outstanding => false,
            };
            if !done {
                break;
            }
            self.sent.pop_front();
            self.first_outstanding = self.first_outstanding.saturating_sub(1);
        }
        if let Some(front) = self.sent.front() {
            self.acked_pns.remove_below(front.pn);
        }
        while self
            .sent
            .get(self.first_outstanding)
            .is_some_and(|p| p.state != SentState::Outstanding)
        {
            self.first_outstanding += 1;
        }
    }

    // ------------------------------------------------------------------ timers

    pub(super) fn pto_base(&self) -> u64 {
        self.srtt + (4 * self.rttvar).max(GRANULARITY_NS) + self.config.max_ack_delay_ns
    }

    pub(super) fn pto_time(&self) -> Option<u64> {
        let awaiting_server = self.role == Role::Client && !self.confirmed;
        if self.in_flight == 0 && !awaiting_server {
            return None;
        }
        let last = self.last_eliciting_sent?;
        let backoff = 1u64 << self.pto_count.min(16);
        Some(last + self.pto_base().saturating_mul(backoff))
    }

    pub(super) fn on_pto(&mut self, now: u64) {
        self.stats.probe_timeouts += 1;
        self.pto_count += 1;
        if self.pto_count >= PERSISTENT_PTOS {
            // Last resort: everything in flight is lost; start over from a small window.
            self.stats.persistent_congestion += 1;
            let mut i = self.first_outstanding;
            while i < self.sent.len() {
                if self.sent[i].state == SentState::Outstanding {
                    self.declare_lost(i);
                }
                i += 1;
            }
            self.cc.on_persistent_congestion(now);
            self.trim_sent(now);
        }
        self.probes = 2;
        // The probe itself is the next eliciting packet; back off from now.
        self.last_eliciting_sent = Some(now);
    }
}
