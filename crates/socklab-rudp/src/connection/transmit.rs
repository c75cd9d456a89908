//! What goes into the next packet of an open connection (ACK, CONNECT, CREDIT, one STREAM
//! frame: retransmissions first, then new data within the peer's credit, probes), within the
//! congestion window and the pacing rate.

use crate::wire::{Header, PacketType, PacketWriter};

use super::recovery::{SentPacket, SentState};
use super::send_buffer::DataRef;
use super::{Connection, Role};

/// An ack-only packet carries a PING this often, so the peer acknowledges it and we can stop
/// repeating old ACK ranges.
const PING_EVERY_ACKS: u32 = 16;
/// Estimated random loss from which tail retransmissions go twice: below it a second copy
/// costs more than the round trip it rarely saves (and a path that only duplicates or
/// overflows its queue would get copies for nothing).
const TAIL_TWICE_MIN_LOSS: f64 = 0.01;

impl Connection {
    fn refill_pacing(&mut self, now: u64) {
        let rate = self.cc.pacing_rate().max(1.0);
        let elapsed = now.saturating_sub(self.pace_stamp);
        self.pace_stamp = now;
        let quantum = self.cc.send_quantum() as f64;
        self.pace_tokens = (self.pace_tokens + rate * elapsed as f64 / 1e9).min(quantum);
        if self.cc.initial_burst() {
            // The initial window leaves back to back: its ACK train measures the bottleneck.
            self.pace_tokens = self.pace_tokens.max(quantum);
        }
    }

    pub(super) fn data_header(&self) -> Header {
        Header {
            ty: PacketType::Data,
            cid: self.cid,
            pn: self.next_pn,
        }
    }

    pub(super) fn untracked(&self, now: u64, len: usize, ack_largest: Option<u64>) -> SentPacket {
        SentPacket {
            pn: self.next_pn - 1,
            time: now,
            size: len as u32,
            state: SentState::Untracked,
            data: None,
            credit: false,
            ack_largest,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            app_limited: false,
        }
    }

    pub(super) fn count_sent(&mut self, len: usize) {
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
    }

    pub(super) fn transmit_open(&mut self, now: u64, buf: &mut [u8]) -> Option<usize> {
        let mss = self.config.max_datagram as u64;
        let probe = self.probes > 0;
        let connect = self.role == Role::Client && !self.confirmed;
        let has_data = self.has_data();
        let mut data_ok = false;
        if has_data && !probe {
            if self.in_flight + mss > self.cc.cwnd() {
                // Window full: wait for ACKs.
            } else {
                self.refill_pacing(now);
                if self.pace_tokens > 0.0 {
                    data_ok = true;
                } else {
                    let rate = self.cc.pacing_rate().max(1.0);
                    let wait = ((-self.pace_tokens + mss as f64) * 1e9 / rate) as u64;
                    self.pace_wait = Some(now + wait.max(1));
                }
            }
        } else if !has_data && self.in_flight + mss <= self.cc.cwnd() && self.app_limited_until == 0
        {
            // Nothing to send although the window is open: rate samples taken until what is
            // in flight now is delivered do not show the path's capacity.
            self.app_limited_until = (self.delivered + self.in_flight).max(1);
        }
        let want_ack = self.ack_pending && self.ack_now;
        if !(want_ack || probe || data_ok || self.credit_pending) {
            return None;
        }
        let header = self.data_header();
        let mut w = PacketWriter::new(buf, header).ok()?;
        let mut ack_largest = None;
        // ACK frames go out when something ack-eliciting waits for one (ACK-only packets of the
        // peer are reported with the next ACK, never acknowledged on their own).
        if self.ack_pending && (self.unacked_eliciting > 0 || want_ack) {
            if let Some(largest) = self.recv_pns.end().map(|e| e - 1) {
                let delay_us = now.saturating_sub(self.largest_recv_time) / 1000;
                let n = w.ack(
                    largest,
                    delay_us,
                    self.recv_pns.iter().rev().map(|r| r.start..=r.end - 1),
                );
                if n > 0 {
                    ack_largest = Some(largest);
                }
            }
        }
        let mut eliciting = false;
        if connect {
            if let Some(cookie) = self.cookie {
                eliciting |= w.connect(&cookie);
            }
        }
        let mut credit = false;
        if self.credit_pending {
            let max = self.consumed + self.config.recv_window;
            if w.credit(max) {
                self.credit_sent = max;
                self.credit_pending = false;
                credit = true;
                eliciting = true;
            }
        }
        let mut data = None;
        if data_ok || probe {
            data = self.write_stream(&mut w, probe);
            eliciting |= data.is_some();
        }
        let ack_only = !eliciting;
        if probe && !eliciting {
            eliciting = w.ping();
        }
        if ack_only && !probe {
            self.ack_only_streak += 1;
            if self.ack_only_streak >= PING_EVERY_ACKS && w.ping() {
                eliciting = true;
                self.ack_only_streak = 0;
            }
        }
        if w.is_empty() {
            return None;
        }
        let len = w.finish();
        self.next_pn += 1;
        self.count_sent(len);
        if ack_largest.is_some() {
            self.ack_pending = false;
            self.ack_now = false;
            self.ack_deadline = None;
            self.unacked_eliciting = 0;
        }
        if probe {
            self.probes -= 1;
        }
        if !eliciting {
            self.stats.ack_only_packets += 1;
            let p = self.untracked(now, len, ack_largest);
            self.sent.push_back(p);
            return Some(len);
        }
        if self.in_flight == 0 {
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        let p = SentPacket {
            pn: header.pn,
            time: now,
            size: len as u32,
            state: SentState::Outstanding,
            data,
            credit,
            ack_largest,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            app_limited: self.app_limited_until != 0,
        };
        self.sent.push_back(p);
        self.in_flight += len as u64;
        self.last_eliciting_sent = Some(now);
        if data.is_some() {
            self.pace_tokens -= len as f64;
        }
        Some(len)
    }

    /// Puts one STREAM frame into `w`: lost data first, then new data; a probe with neither
    /// resends the oldest unacknowledged data.
    fn write_stream(&mut self, w: &mut PacketWriter<'_>, probe: bool) -> Option<DataRef> {
        // Retransmissions.
        while let Some(r) = self.retx.front().copied() {
            let Some(idx) = self.chunk_index(r.chunk) else {
                self.retx.pop_front();
                continue;
            };
            let start = u64::from(r.start);
            let end = start + u64::from(r.len);
            let Some(gap) = self.chunks[idx].acked.first_gap_in(start..end) else {
                self.retx.pop_front();
                continue;
            };
            let written =
                self.emit_chunk(w, idx, gap.start as usize, (gap.end - gap.start) as usize)?;
            let sent_end = gap.start + written.len as u64;
            if sent_end >= end {
                self.retx.pop_front();
            } else if let Some(front) = self.retx.front_mut() {
                front.start = sent_end as u32;
                front.len = (end - sent_end) as u32;
            }
            self.note_retransmit(idx, written.len);
            if !self.has_new_data() && self.cc.random_loss() >= TAIL_TWICE_MIN_LOSS {
                // The tail on a lossy path: nothing new follows, so a lost retransmission shows
                // only after another round trip (or a probe timeout). Sending it twice makes
                // that p^2 instead of p (1 % at 10 % random loss), for a few extra packets.
                self.retx_again.push_back(written);
            }
            return Some(written);
        }
        while let Some(r) = self.retx_again.pop_front() {
            let Some(idx) = self.chunk_index(r.chunk) else {
                continue;
            };
            let start = u64::from(r.start);
            let Some(gap) = self.chunks[idx]
                .acked
                .first_gap_in(start..start + u64::from(r.len))
            else {
                continue;
            };
            let written =
                self.emit_chunk(w, idx, gap.start as usize, (gap.end - gap.start) as usize)?;
            self.note_retransmit(idx, written.len);
            return Some(written);
        }
        // New data, within the peer's credit.
        let credit = self.peer_credit_left();
        if credit > 0 {
            if let Some(idx) = self.chunk_index(self.unsent_chunk) {
                let chunk_len = self.chunks[idx].data.len();
                if self.unsent_pos < chunk_len {
                    let max = (chunk_len - self.unsent_pos).min(credit as usize);
                    let written = self.emit_chunk(w, idx, self.unsent_pos, max)?;
                    self.unsent_pos += written.len as usize;
                    self.new_bytes_sent += u64::from(written.len);
                    self.stats.stream_bytes_sent += u64::from(written.len);
                    if self.unsent_pos >= chunk_len {
                        self.unsent_chunk += 1;
                        self.unsent_pos = 0;
                    }
                    self.stats.data_packets_sent += 1;
                    return Some(written);
                }
            }
        }
        if probe {
            // Tail-loss probe: resend the oldest data still unacknowledged.
            let oldest = self
                .sent
                .iter()
                .skip(self.first_outstanding)
                .find(|p| p.state == SentState::Outstanding && p.data.is_some())
                .and_then(|p| p.data)?;
            let idx = self.chunk_index(oldest.chunk)?;
            let start = u64::from(oldest.start);
            let gap = self.chunks[idx]
                .acked
                .first_gap_in(start..start + u64::from(oldest.len))?;
            let written =
                self.emit_chunk(w, idx, gap.start as usize, (gap.end - gap.start) as usize)?;
            self.note_retransmit(idx, written.len);
            return Some(written);
        }
        None
    }

    fn note_retransmit(&mut self, idx: usize, len: u32) {
        self.stats.retransmitted_packets += 1;
        self.stats.data_packets_sent += 1;
        self.stats.stream_bytes_retransmitted += u64::from(len);
        *self.stream_retx.entry(self.chunks[idx].stream).or_insert(0) += 1;
    }

    fn emit_chunk(
        &mut self,
        w: &mut PacketWriter<'_>,
        idx: usize,
        pos: usize,
        max: usize,
    ) -> Option<DataRef> {
        let chunk = &self.chunks[idx];
        let n = w.stream(
            chunk.stream,
            chunk.offset + pos as u64,
            &chunk.data[pos..pos + max],
        );
        (n > 0).then_some(DataRef {
            chunk: self.chunk_base + idx as u64,
            start: pos as u32,
            len: n as u32,
        })
    }
}
