//! [`Model`]: a model-based congestion controller in the style of BBR (Cardwell et al., "BBR:
//! Congestion-Based Congestion Control", and the IETF draft): it paces at its estimate of the
//! bottleneck bandwidth and bounds the data in flight to a multiple of the bandwidth-delay
//! product, instead of halving its rate on every loss. What it adds for lossy links: random loss
//! is *estimated* (the loss fraction seen while cruising at the estimated rate) and compensated
//! for, and loss is treated as congestion only when it rises with the sending rate (more loss
//! while probing above the estimate than while cruising) or comes with a standing queue (RTT well
//! above its minimum).
//!
//! Units: bandwidth in bytes per second, time in nanoseconds, sizes in bytes.

/// What the connection tells the controller for each ACK frame that acknowledged something.
#[derive(Debug, Clone, Copy, Default)]
pub struct AckSample {
    /// Bytes newly acknowledged by this ACK.
    pub acked_bytes: u64,
    /// Bytes newly declared lost while processing this ACK.
    pub lost_bytes: u64,
    /// Delivery rate sample (bytes/s), if one could be taken.
    pub delivery_rate: Option<f64>,
    /// True when the rate sample was taken while the sender was application-limited.
    pub app_limited: bool,
    /// A new RTT sample (ns), if the largest acknowledged packet was newly acknowledged.
    pub rtt_ns: Option<u64>,
    /// The connection's delivered-bytes counter when the newest acknowledged packet was sent.
    pub packet_delivered: u64,
    /// The connection's delivered-bytes counter after this ACK.
    pub delivered: u64,
    /// Bytes in flight after this ACK.
    pub in_flight: u64,
}

/// The controller's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Exponential search for the bandwidth (gain 2/ln 2 per round).
    Startup,
    /// Drains the queue Startup built.
    Drain,
    /// Cruises at the estimate, probing up (1.25) and draining (0.75) in turn.
    ProbeBw,
    /// Briefly lowers the data in flight to refresh the minimum RTT.
    ProbeRtt,
}

const STARTUP_GAIN: f64 = 2.885;
const DRAIN_GAIN: f64 = 1.0 / 2.885;
const PROBE_GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
const CWND_GAIN: f64 = 2.0;
/// Rounds the bandwidth max filter remembers.
const BW_WINDOW_ROUNDS: u64 = 10;
/// How long a min-RTT sample stays valid before ProbeRtt.
const MIN_RTT_WINDOW_NS: u64 = 10_000_000_000;
const PROBE_RTT_NS: u64 = 200_000_000;
/// Rounds a congestion cap on the estimate lasts unless a probe lifts it sooner.
const CAP_ROUNDS: u64 = 2 * BW_WINDOW_ROUNDS;
/// The initial-window train may lift the start-up estimate to at most this multiple of the
/// initial window's rate (IW per RTT): a jump of about four startup rounds, bounded so that ACKs
/// bunched by a busy receiver or sender cannot lift it without limit.
const TRAIN_MAX_JUMP: f64 = 64.0;
/// Share of the train's dispersion rate taken as the first bandwidth sample: the train measures
/// the bottleneck's capacity, not what other flows leave of it, so Startup starts at half of it
/// and its usual gain and exit rules find the rest within a round or two.
const TRAIN_SHARE: f64 = 0.5;
/// Rounds of random-loss estimate needed before loss with a queue counts as congestion: a
/// ramp that queued early leaves an estimate made of one short round (a dozen packets), and the
/// path's own random loss would read as congestion against it and cap the rate below the path's.
const MIN_LOSS_SAMPLES: u32 = 3;
/// Largest random-loss fraction compensated for.
const MAX_COMPENSATED_LOSS: f64 = 0.5;

/// The controller state.
#[derive(Debug, Clone)]
pub struct Model {
    mss: u64,
    mode: Mode,
    /// Per-round maxima of the delivery rate: (round, bytes/s).
    bw_samples: [(u64, f64); BW_WINDOW_ROUNDS as usize],
    btl_bw: f64,
    min_rtt_ns: u64,
    min_rtt_stamp: u64,
    initial_rtt_ns: u64,
    round: u64,
    next_round_delivered: u64,
    round_acked: u64,
    round_lost: u64,
    round_max_rtt: u64,
    /// Smallest RTT sample of the current round.
    round_min_rtt: u64,
    /// The last finished round's smallest RTT stood well above the minimum: a queue that
    /// every packet of the round waited in.
    standing_queue: bool,
    full_bw: f64,
    full_bw_rounds: u32,
    filled_pipe: bool,
    cycle_index: usize,
    cycle_stamp: u64,
    probe_rtt_done: Option<u64>,
    probe_rtt_round_done: bool,
    /// Estimated random (non-congestive) loss fraction.
    random_loss: f64,
    loss_samples: u32,
    /// Loss fraction of the last probing-up round, to compare with `random_loss`.
    congestion_events: u64,
    /// When set, caps the estimate after a congestion signal (bytes/s), until a probe measures
    /// more or [`CAP_ROUNDS`] rounds pass.
    bw_cap: Option<f64>,
    /// Round in which `bw_cap` was set.
    bw_cap_round: u64,
    initial_cwnd: u64,
    cwnd: u64,
    pacing_rate: f64,
    max_rate: Option<f64>,
    restart_stamp: u64,
    /// The initial window's ACK train (round 1): time of its first ACK, bytes acknowledged after
    /// it, and the fastest dispersion rate seen (bytes/s).
    train_first: Option<u64>,
    train_bytes: u64,
    train_rate: f64,
}

impl Model {
    /// A controller for packets of `mss` bytes with an initial window of `initial_packets` and an
    /// RTT guess of `initial_rtt_ns` until the first sample; `max_rate` caps the pacing rate.
    pub fn new(
        mss: u64,
        initial_packets: u64,
        initial_rtt_ns: u64,
        max_rate: Option<f64>,
    ) -> Model {
        let initial_cwnd = mss * initial_packets.max(2);
        let mut m = Model {
            mss,
            mode: Mode::Startup,
            bw_samples: [(0, 0.0); BW_WINDOW_ROUNDS as usize],
            btl_bw: 0.0,
            min_rtt_ns: u64::MAX,
            min_rtt_stamp: 0,
            initial_rtt_ns: initial_rtt_ns.max(1_000),
            round: 0,
            next_round_delivered: 0,
            round_acked: 0,
            round_lost: 0,
            round_max_rtt: 0,
            round_min_rtt: u64::MAX,
            standing_queue: false,
            full_bw: 0.0,
            full_bw_rounds: 0,
            filled_pipe: false,
            cycle_index: 0,
            cycle_stamp: 0,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            random_loss: 0.0,
            loss_samples: 0,
            congestion_events: 0,
            bw_cap: None,
            bw_cap_round: 0,
            initial_cwnd,
            cwnd: initial_cwnd,
            pacing_rate: 0.0,
            max_rate,
            restart_stamp: 0,
            train_first: None,
            train_bytes: 0,
            train_rate: 0.0,
        };
        m.pacing_rate = m.cap(STARTUP_GAIN * initial_cwnd as f64 * 1e9 / m.initial_rtt_ns as f64);
        m
    }

    fn cap(&self, rate: f64) -> f64 {
        match self.max_rate {
            Some(max) => rate.min(max),
            None => rate,
        }
    }

    /// The phase.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Congestion window in bytes (bytes in flight may not exceed it).
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    /// Pacing rate in bytes per second.
    pub fn pacing_rate(&self) -> f64 {
        self.pacing_rate
    }

    /// Estimated bottleneck bandwidth in bytes per second (what arrives at the receiver).
    pub fn btl_bw(&self) -> f64 {
        self.btl_bw
    }

    /// Minimum RTT seen (ns), if any.
    pub fn min_rtt_ns(&self) -> Option<u64> {
        (self.min_rtt_ns != u64::MAX).then_some(self.min_rtt_ns)
    }

    /// Estimated random loss fraction (0..=0.5).
    pub fn random_loss(&self) -> f64 {
        self.random_loss
    }

    /// Rounds in which loss rose with the sending rate or came with a queue.
    pub fn congestion_events(&self) -> u64 {
        self.congestion_events
    }

    /// Round-trip counter (a round ends when a packet sent after its start is acknowledged).
    pub fn round(&self) -> u64 {
        self.round
    }

    /// Most bytes to send back to back (the pacing quantum): about 1 ms at the pacing rate,
    /// between 2 and 44 packets.
    ///
    /// Before the first RTT sample the whole initial window goes back to back: the bottleneck
    /// spaces the train at its rate and the spacing of the ACKs measures it (packet-train
    /// dispersion), which lets Startup skip the first rounds of its ramp.
    pub fn send_quantum(&self) -> u64 {
        if self.initial_burst() {
            return self.initial_cwnd.max(2 * self.mss);
        }
        let q = (self.pacing_rate / 1000.0) as u64;
        q.clamp(2 * self.mss, 44 * self.mss)
    }

    /// True until the first ACK of a fresh connection: the initial window may leave as one
    /// train (the window bounds it, the pacing rate does not).
    pub fn initial_burst(&self) -> bool {
        self.round == 0
            && self.mode == Mode::Startup
            && !self.filled_pipe
            && self.restart_stamp == 0
    }

    fn pacing_gain(&self) -> f64 {
        match self.mode {
            Mode::Startup => STARTUP_GAIN,
            Mode::Drain => DRAIN_GAIN,
            Mode::ProbeBw => PROBE_GAINS[self.cycle_index],
            Mode::ProbeRtt => 1.0,
        }
    }

    fn rtt_for_bdp(&self) -> u64 {
        if self.min_rtt_ns == u64::MAX {
            self.initial_rtt_ns
        } else {
            self.min_rtt_ns
        }
    }

    /// The rate the path accepts from us: the delivered-rate estimate, compensated for the
    /// estimated random loss (lost packets used the path up to where they were dropped).
    fn path_rate(&self) -> f64 {
        let mut bw = self.btl_bw / (1.0 - self.random_loss.min(MAX_COMPENSATED_LOSS));
        if let Some(cap) = self.bw_cap {
            bw = bw.min(cap);
        }
        bw
    }

    fn bdp(&self, gain: f64) -> u64 {
        if self.btl_bw <= 0.0 {
            return self.initial_cwnd;
        }
        (gain * self.path_rate() * self.rtt_for_bdp() as f64 / 1e9) as u64
    }

    /// Processes one ACK.
    pub fn on_ack(&mut self, now: u64, s: &AckSample) {
        self.round_acked += s.acked_bytes;
        self.round_lost += s.lost_bytes;
        let round_start = s.packet_delivered >= self.next_round_delivered;
        if round_start {
            self.next_round_delivered = s.delivered;
        }
        if let Some(rtt) = s.rtt_ns {
            self.round_max_rtt = self.round_max_rtt.max(rtt);
            self.round_min_rtt = self.round_min_rtt.min(rtt);
            if rtt <= self.min_rtt_ns || now.saturating_sub(self.min_rtt_stamp) > MIN_RTT_WINDOW_NS
            {
                if rtt < self.min_rtt_ns || self.mode != Mode::ProbeRtt {
                    self.min_rtt_ns = rtt;
                }
                self.min_rtt_stamp = now;
            }
        }
        self.track_train(now, s, round_start);
        if round_start {
            self.end_round();
            self.round += 1;
        }
        if let Some(rate) = s.delivery_rate {
            self.update_bw(rate, s.app_limited);
        }
        self.update_mode(now, s, round_start);
        self.set_outputs();
    }

    fn end_round(&mut self) {
        let total = self.round_acked + self.round_lost;
        let queueing = self.min_rtt_ns != u64::MAX
            && self.round_max_rtt > self.min_rtt_ns + (self.min_rtt_ns / 4).max(2_000_000);
        // Enough packets for the fraction to mean something.
        if total >= 8 * self.mss {
            let fraction = self.round_lost as f64 / total as f64;
            let gain = self.pacing_gain();
            let margin = 0.02 + 0.5 * self.random_loss;
            if self.mode == Mode::ProbeBw && gain > 1.0 && fraction > self.random_loss + margin {
                // Loss rose with the sending rate: congestion. Stop probing, cap the estimate
                // at what was delivered, and drain.
                self.congestion_events += 1;
                self.set_cap(self.path_rate());
                self.cycle_index = 1;
            } else if (self.mode == Mode::ProbeBw && gain <= 1.0 || self.mode == Mode::Startup)
                && !queueing
            {
                // Cruising at (or below) the estimate with no standing queue, or ramping up in
                // Startup before any queue formed: what is lost here is the path's random loss
                // (a drop-tail bottleneck drops only from a full queue). Learning it during the
                // ramp means Drain and the first cruise already send at what the path accepts
                // instead of at the delivered rate, and loss never ends the ramp.
                let weight = if self.loss_samples < 8 { 0.5 } else { 0.125 };
                self.random_loss += weight * (fraction - self.random_loss);
                self.random_loss = self.random_loss.clamp(0.0, MAX_COMPENSATED_LOSS);
                self.loss_samples += 1;
            } else if self.mode == Mode::ProbeBw
                && queueing
                && self.loss_samples >= MIN_LOSS_SAMPLES
                && fraction > self.random_loss + margin
            {
                // Loss together with a standing queue: congestion.
                self.congestion_events += 1;
                self.set_cap(self.path_rate() * 0.95);
            }
        }
        // Even the round's fastest packet queued: the queue stood the whole round (jitter moves
        // single samples, not the minimum of a round's worth).
        self.standing_queue = self.min_rtt_ns != u64::MAX
            && self.round_min_rtt != u64::MAX
            && self.round_min_rtt > self.min_rtt_ns + (self.min_rtt_ns / 4).max(4_000_000);
        self.round_acked = 0;
        self.round_lost = 0;
        self.round_max_rtt = 0;
        self.round_min_rtt = u64::MAX;
    }

    /// Round 1 carries the ACKs of the initial window, sent back to back (see
    /// [`Model::send_quantum`]): bytes acknowledged after the first of them over the time since
    /// it give the bottleneck's rate. Once a third of the window is acknowledged the estimate
    /// (bounded by [`TRAIN_MAX_JUMP`], scaled by [`TRAIN_SHARE`]) becomes a bandwidth sample.
    fn track_train(&mut self, now: u64, s: &AckSample, round_start: bool) {
        if self.mode != Mode::Startup || self.filled_pipe || self.restart_stamp != 0 {
            return;
        }
        // The ACK that starts round 1 is the train's first; the round's others follow it.
        let first_ack = self.round == 0 && round_start;
        if !(first_ack || self.round == 1 && !round_start) {
            return;
        }
        match self.train_first {
            None => {
                self.train_first = Some(now);
                return;
            }
            Some(first) => {
                self.train_bytes += s.acked_bytes + s.lost_bytes;
                if now > first && self.train_bytes >= 2 * self.mss {
                    let rate = self.train_bytes as f64 * 1e9 / (now - first) as f64;
                    self.train_rate = self.train_rate.max(rate);
                }
            }
        }
        // A third of the train dispersed is enough to use its rate: using it at once (rather
        // than at the end of the round) lets the packets that the train's ACKs release leave at
        // it; later ACKs of the train may raise it.
        if self.train_bytes >= self.initial_cwnd / 3 && self.train_rate > 0.0 {
            let iw_rate = self.initial_cwnd as f64 * 1e9 / self.rtt_for_bdp() as f64;
            let rate = (TRAIN_SHARE * self.train_rate).min(TRAIN_MAX_JUMP * iw_rate);
            if rate > self.btl_bw {
                self.update_bw(rate, false);
            }
        }
    }

    fn update_bw(&mut self, rate: f64, app_limited: bool) {
        if app_limited && rate < self.btl_bw {
            return;
        }
        let slot = (self.round % BW_WINDOW_ROUNDS) as usize;
        if self.bw_samples[slot].0 != self.round {
            self.bw_samples[slot] = (self.round, 0.0);
        }
        if rate > self.bw_samples[slot].1 {
            self.bw_samples[slot].1 = rate;
        }
        let oldest = self.round.saturating_sub(BW_WINDOW_ROUNDS - 1);
        self.btl_bw = self
            .bw_samples
            .iter()
            .filter(|(r, _)| *r >= oldest && *r <= self.round)
            .map(|&(_, b)| b)
            .fold(0.0, f64::max);
        // A probe that measured more than the cap lifts it (the path gives more than the
        // congestion signal suggested); so does age: the signal is forgotten like old samples.
        if let Some(cap) = self.bw_cap {
            let raw = self.btl_bw / (1.0 - self.random_loss.min(MAX_COMPENSATED_LOSS));
            let probed = self.mode == Mode::ProbeBw && self.cycle_index == 0 && raw > cap * 1.02;
            if probed || self.round > self.bw_cap_round + CAP_ROUNDS {
                self.bw_cap = None;
            }
        }
    }

    fn update_mode(&mut self, now: u64, s: &AckSample, round_start: bool) {
        match self.mode {
            Mode::Startup => {
                if round_start && !s.app_limited {
                    if self.btl_bw >= self.full_bw * 1.25 {
                        self.full_bw = self.btl_bw;
                        self.full_bw_rounds = 0;
                    } else {
                        self.full_bw_rounds += 1;
                        // Three rounds without growth (BBR's rule), or one when a standing queue
                        // already shows the pipe is full: more rounds at the startup gain only
                        // overflow the bottleneck's buffer.
                        if self.full_bw_rounds >= 3 || self.standing_queue {
                            self.filled_pipe = true;
                            self.mode = Mode::Drain;
                        }
                    }
                }
            }
            Mode::Drain => {
                if s.in_flight <= self.bdp(1.0) {
                    self.enter_probe_bw(now);
                }
            }
            Mode::ProbeBw => {
                let phase_ns = self.rtt_for_bdp();
                let elapsed = now.saturating_sub(self.cycle_stamp);
                let advance = match self.cycle_index {
                    // Probe up for at least one min-RTT, until the extra inflight is there.
                    0 => {
                        elapsed > phase_ns && s.in_flight >= self.bdp(1.25)
                            || elapsed > 2 * phase_ns
                    }
                    // Drain until the queue is gone or one min-RTT passed.
                    1 => elapsed > phase_ns || s.in_flight <= self.bdp(1.0),
                    _ => elapsed > phase_ns,
                };
                if advance {
                    self.cycle_index = (self.cycle_index + 1) % PROBE_GAINS.len();
                    self.cycle_stamp = now;
                }
            }
            Mode::ProbeRtt => {}
        }
        // ProbeRtt: entered when the min-RTT sample is stale.
        if self.mode != Mode::ProbeRtt
            && self.min_rtt_ns != u64::MAX
            && now.saturating_sub(self.min_rtt_stamp) > MIN_RTT_WINDOW_NS
        {
            self.mode = Mode::ProbeRtt;
            self.probe_rtt_done = None;
            self.probe_rtt_round_done = false;
        }
        if self.mode == Mode::ProbeRtt {
            if self.probe_rtt_done.is_none() && s.in_flight <= self.probe_rtt_cwnd() {
                self.probe_rtt_done = Some(now + PROBE_RTT_NS.max(self.rtt_for_bdp()));
                self.next_round_delivered = s.delivered;
            } else if let Some(done) = self.probe_rtt_done {
                if round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done && now >= done {
                    self.min_rtt_stamp = now;
                    if self.filled_pipe {
                        self.enter_probe_bw(now);
                    } else {
                        self.mode = Mode::Startup;
                    }
                }
            }
        }
    }

    fn set_cap(&mut self, cap: f64) {
        self.bw_cap = Some(cap);
        self.bw_cap_round = self.round;
    }

    fn enter_probe_bw(&mut self, now: u64) {
        self.mode = Mode::ProbeBw;
        // Start cruising (index 2), so the first probe comes after a measured cruise round.
        self.cycle_index = 2;
        self.cycle_stamp = now;
    }

    fn probe_rtt_cwnd(&self) -> u64 {
        // BBRv2's gentler ProbeRtt: half the BDP rather than four packets.
        (self.bdp(0.5)).max(4 * self.mss)
    }

    fn set_outputs(&mut self) {
        if self.btl_bw > 0.0 {
            let rate = self.pacing_gain() * self.path_rate();
            // In Startup never slow down below the initial pacing.
            if self.filled_pipe || rate > self.pacing_rate {
                self.pacing_rate = self.cap(rate);
            }
        }
        let target = self.bdp(CWND_GAIN) + 3 * self.send_quantum();
        self.cwnd = match self.mode {
            // Grow by what was acknowledged, but (as Linux BBR) only up to the startup gain
            // times the BDP: beyond that the extra data only queues at the bottleneck, and a
            // queue that outgrows the buffer loses whole rounds of packets.
            // The ramp is paced: the pacing rate grows by the startup gain per round from the
            // delivery-rate samples, and the window is only its safety bound. Growing the window
            // by what was acknowledged (slow start's doubling, less the random loss: 1.9x per
            // round at 10 % loss) bound the ramp to 7 rounds where pacing needs 4.
            Mode::Startup => {
                let ceiling =
                    (self.bdp(STARTUP_GAIN) + 3 * self.send_quantum()).max(self.initial_cwnd);
                self.cwnd.max(ceiling)
            }
            Mode::ProbeRtt => self.probe_rtt_cwnd(),
            _ => target.max(4 * self.mss),
        };
        if self.mode == Mode::Startup && self.filled_pipe {
            self.cwnd = self.cwnd.min(target);
        }
    }

    /// Bytes declared lost by the loss timer (outside an ACK).
    pub fn on_loss(&mut self, lost_bytes: u64) {
        self.round_lost += lost_bytes;
    }

    /// Persistent congestion (every probe timed out): start over from a small window, keeping
    /// the min-RTT and random-loss estimates.
    pub fn on_persistent_congestion(&mut self, now: u64) {
        self.cwnd = self.initial_cwnd;
        self.btl_bw = 0.0;
        self.bw_samples = [(0, 0.0); BW_WINDOW_ROUNDS as usize];
        self.full_bw = 0.0;
        self.full_bw_rounds = 0;
        self.filled_pipe = false;
        self.mode = Mode::Startup;
        self.bw_cap = None;
        self.restart_stamp = now;
        self.pacing_rate =
            self.cap(STARTUP_GAIN * self.initial_cwnd as f64 * 1e9 / self.rtt_for_bdp() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1400;

    /// Feeds ACKs of a path with a fixed bandwidth and RTT, `loss` of what is sent lost at random.
    fn drive(model: &mut Model, rate: f64, rtt: u64, loss: f64, rounds: u64) {
        let mut delivered = 0u64;
        let mut now = 0u64;
        for _ in 0..rounds {
            let sent = (model.pacing_rate().min(rate / (1.0 - loss)) * rtt as f64 / 1e9) as u64;
            let acked = ((1.0 - loss) * sent as f64) as u64;
            let lost = sent - acked;
            let before = delivered;
            // Ten ACKs per round.
            for i in 0..10 {
                now += rtt / 10;
                delivered += acked / 10;
                let s = AckSample {
                    acked_bytes: acked / 10,
                    lost_bytes: lost / 10,
                    delivery_rate: Some(acked as f64 * 1e9 / rtt as f64),
                    app_limited: false,
                    rtt_ns: Some(rtt),
                    packet_delivered: if i == 9 { before + 1 } else { before },
                    delivered,
                    in_flight: sent / 2,
                };
                model.on_ack(now, &s);
            }
        }
    }

    #[test]
    fn startup_finds_the_bandwidth_and_cruises_at_it() {
        let mut m = Model::new(MSS, 10, 100_000_000, None);
        let rate = 12_500_000.0; // 100 Mbit/s
        drive(&mut m, rate, 100_000_000, 0.0, 60);
        assert_eq!(m.mode(), Mode::ProbeBw);
        let bw = m.btl_bw();
        assert!((bw - rate).abs() / rate < 0.05, "bw {bw}");
        assert!(m.cwnd() >= (2.0 * rate * 0.1) as u64, "cwnd {}", m.cwnd());
    }

    #[test]
    fn random_loss_is_estimated_and_not_taken_for_congestion() {
        let mut m = Model::new(MSS, 10, 100_000_000, None);
        let rate = 12_500_000.0;
        drive(&mut m, rate, 100_000_000, 0.10, 200);
        assert!(
            (m.random_loss() - 0.10).abs() < 0.03,
            "loss {}",
            m.random_loss()
        );
        // The pacing rate stays near what the path accepts (rate / (1 - p)), not halved.
        let accept = rate / 0.9;
        assert!(m.pacing_rate() > 0.7 * accept, "pacing {}", m.pacing_rate());
    }

    #[test]
    fn random_loss_is_learned_during_startup_and_does_not_end_it() {
        let mut m = Model::new(MSS, 10, 100_000_000, None);
        drive(&mut m, 12_500_000.0, 100_000_000, 0.10, 4);
        assert_eq!(m.mode(), Mode::Startup);
        assert!(m.random_loss() > 0.05, "loss {}", m.random_loss());
    }

    #[test]
    fn the_initial_window_train_lifts_the_startup_estimate() {
        let mut m = Model::new(MSS, 10, 100_000_000, None);
        assert!(m.initial_burst());
        assert_eq!(m.send_quantum(), 10 * MSS);
        // The window left back to back; the bottleneck (100 Mbit/s) spaced it 112 us a packet
        // and the ACKs (one per two packets) come back with that spacing.
        let gap = 2 * MSS * 8 * 1_000_000_000 / 100_000_000;
        let mut now = 100_000_000;
        let mut delivered = 0;
        for i in 0..5 {
            delivered += 2 * MSS;
            let s = AckSample {
                acked_bytes: 2 * MSS,
                delivery_rate: Some(2.0 * MSS as f64 * 1e9 / 100e6),
                rtt_ns: Some(100_000_000),
                packet_delivered: 0,
                delivered,
                in_flight: 10 * MSS - delivered,
                ..AckSample::default()
            };
            m.on_ack(now, &s);
            assert!(!m.initial_burst(), "ack {i}");
            now += gap;
        }
        // The first ACK of the next round ends the train's round.
        let s = AckSample {
            acked_bytes: MSS,
            rtt_ns: Some(100_000_000),
            packet_delivered: delivered,
            delivered: delivered + MSS,
            ..AckSample::default()
        };
        m.on_ack(200_000_000, &s);
        let rate = 12_500_000.0;
        assert!(m.btl_bw() >= TRAIN_SHARE * rate * 0.9, "bw {}", m.btl_bw());
        assert!(m.pacing_rate() >= STARTUP_GAIN * TRAIN_SHARE * rate * 0.9);
        // Bounded: never above the capacity the train measured.
        assert!(m.btl_bw() <= rate * 1.01, "bw {}", m.btl_bw());
    }

    #[test]
    fn rate_cap_is_honoured() {
        let mut m = Model::new(MSS, 10, 10_000_000, Some(1_000_000.0));
        drive(&mut m, 12_500_000.0, 10_000_000, 0.0, 50);
        assert!(m.pacing_rate() <= 1_000_000.0);
    }
}
