//! The server side of one iperf3 test, sans I/O: events in (control bytes, a stream that
//! connected with a cookie, streams stopped with their figures, the clock), actions out
//! (bytes to send on the control connection, start or stop the streams, done, fail). No
//! sockets: the sink's I/O drives it (`sink::iperf3`), and the tests drive it directly.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::options::{sink_sends, stream_id, ParamCheck, ServerError};
use super::proto::{frame, json_len, Cookie, Params, Results, State, COOKIE_LEN};

/// How long a client may take to send its cookie and parameters.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the streams may take to connect after `CREATE_STREAMS`.
pub const STREAMS_TIMEOUT: Duration = Duration::from_secs(10);
/// How long past its `-t` and `-O` a timed test may run before the sink gives up on its
/// `TEST_END`.
pub const RUN_GRACE: Duration = Duration::from_secs(30);
/// How long the results exchange and the final `IPERF_DONE` may take.
pub const RESULTS_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a test is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading the 37-byte cookie.
    Cookie,
    /// `PARAM_EXCHANGE` sent; reading the parameters.
    Params,
    /// `CREATE_STREAMS` sent; waiting for the streams.
    Streams,
    /// `TEST_START`, `TEST_RUNNING` sent; waiting for `TEST_END`.
    Running,
    /// `TEST_END` read; waiting for the streams to stop and their figures.
    Stopping,
    /// `EXCHANGE_RESULTS` sent; reading the client's results.
    ClientResults,
    /// Our results and `DISPLAY_RESULTS` sent; waiting for `IPERF_DONE`.
    Display,
    /// Over, well.
    Done,
    /// Over, badly.
    Failed,
}

/// What the I/O must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Write these bytes on the control connection.
    Send(Vec<u8>),
    /// Start the streams: the sink receives, or sends when `reverse`.
    StartStreams {
        /// The sink sends.
        reverse: bool,
    },
    /// Stop the streams and report their figures ([`Server::streams_stopped`]).
    StopStreams,
    /// The test is over; the client's own results, kept beside ours.
    Done(Box<Results>),
    /// The test failed (the reason, one line); close everything.
    Fail(String),
}

/// What one stream of a test does, known once all its streams are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Role {
    /// iperf3's id of the stream (by the order the streams were accepted).
    pub id: i64,
    /// The sink sends on it (`reverse`, or the second half of a `bidirectional` test).
    pub sends: bool,
}

/// One test, as its control connection sees it.
#[derive(Debug)]
pub struct Server {
    phase: Phase,
    buf: Vec<u8>,
    cookie: Option<Cookie>,
    params: Option<Params>,
    check: Option<ParamCheck>,
    stream_ids: Vec<i64>,
    /// The accept order of each stream, by the order they joined.
    accepted: Vec<u64>,
    /// Each stream's role, by the order they joined, once all are in.
    roles: Vec<Role>,
    ours: Option<Results>,
    client_results: Option<Results>,
    deadline: Option<Instant>,
    actions: VecDeque<Action>,
}

impl Server {
    /// A test whose control connection was accepted at `now`.
    pub fn new(now: Instant) -> Server {
        Server {
            phase: Phase::Cookie,
            buf: Vec::new(),
            cookie: None,
            params: None,
            check: None,
            stream_ids: Vec::new(),
            accepted: Vec::new(),
            roles: Vec::new(),
            ours: None,
            client_results: None,
            deadline: Some(now + HANDSHAKE_TIMEOUT),
            actions: VecDeque::new(),
        }
    }

    /// A test whose parameters, once read, are put to `check` before its streams are created;
    /// a refusal is sent to the client as `SERVER_ERROR` (the client prints iperf3's text for
    /// its error number) and fails the test.
    pub fn with_check(now: Instant, check: ParamCheck) -> Server {
        Server {
            check: Some(check),
            ..Server::new(now)
        }
    }

    /// Where the test is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The test's cookie, once read.
    pub fn cookie(&self) -> Option<Cookie> {
        self.cookie
    }

    /// The client's parameters, once read.
    pub fn params(&self) -> Option<&Params> {
        self.params.as_ref()
    }

    /// The ids of the streams connected so far, in order.
    pub fn stream_ids(&self) -> &[i64] {
        &self.stream_ids
    }

    /// The next thing to do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When [`Server::tick`] must be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    fn over(&self) -> bool {
        matches!(self.phase, Phase::Done | Phase::Failed)
    }

    fn fail(&mut self, why: String) {
        if self.over() {
            return;
        }
        if matches!(self.phase, Phase::Running | Phase::Stopping) {
            self.actions.push_back(Action::StopStreams);
        }
        if !matches!(self.phase, Phase::Cookie) {
            // SERVER_ERROR and iperf3's nearest reason, which its client prints (issue 27
            // part 4); nothing to a client that is gone or ended the test itself.
            use super::refusal::Stage;
            let stage = match self.phase {
                Phase::Cookie | Phase::Params => Stage::Handshake,
                Phase::Streams => Stage::Streams,
                Phase::Running | Phase::Stopping => Stage::Running,
                Phase::ClientResults => Stage::Results,
                _ => Stage::Display,
            };
            if let Some((code, errno)) = super::refusal::code_for(stage, &why) {
                let bytes = super::refusal::server_error(code, errno);
                self.actions.push_back(Action::Send(bytes));
            }
        }
        self.actions.push_back(Action::Fail(why));
        self.phase = Phase::Failed;
        self.deadline = None;
        self.buf.clear();
    }

    /// The clock: a deadline that passed fails the test.
    pub fn tick(&mut self, now: Instant) {
        if self.deadline.is_some_and(|d| now >= d) {
            let what = match self.phase {
                Phase::Cookie | Phase::Params => "the cookie and parameters",
                Phase::Streams => "the streams to connect",
                Phase::Running | Phase::Stopping => "TEST_END",
                _ => "the results exchange",
            };
            self.fail(format!(
                "iperf3 client timed out: waited too long for {what}"
            ));
        }
    }

    /// The client closed its control connection.
    pub fn control_closed(&mut self) {
        if !self.over() {
            let phase = self.phase;
            self.fail(format!(
                "iperf3 client closed its control connection in phase {phase:?}"
            ));
        }
    }

    /// Bytes read from the control connection.
    pub fn control_bytes(&mut self, now: Instant, bytes: &[u8]) {
        // A deadline passed is a deadline passed, even for a client that trickles bytes so
        // that no read ever waits for a tick (issue 27 part 4).
        self.tick(now);
        if self.over() {
            return;
        }
        self.buf.extend_from_slice(bytes);
        while !self.over() && self.step(now) {}
    }

    /// Consumes what the buffer holds for this phase; `true` when it advanced.
    fn step(&mut self, now: Instant) -> bool {
        match self.phase {
            Phase::Cookie => {
                if !super::proto::may_be_cookie(&self.buf[..self.buf.len().min(COOKIE_LEN)]) {
                    self.fail("not an iperf3 cookie (36 printable characters and a NUL)".into());
                    return false;
                }
                if self.buf.len() < COOKIE_LEN {
                    return false;
                }
                match Cookie::parse(&self.buf[..COOKIE_LEN]) {
                    Ok(c) => self.cookie = Some(c),
                    Err(e) => {
                        self.fail(e);
                        return false;
                    }
                }
                self.buf.drain(..COOKIE_LEN);
                self.send_state(State::ParamExchange);
                self.phase = Phase::Params;
                true
            }
            Phase::Params => match self.take_parsed(Params::parse) {
                None => false,
                Some(p) => {
                    if let Some(Err(e)) = self.check.map(|check| check(&p)) {
                        self.server_error(e);
                        return false;
                    }
                    self.params = Some(p);
                    self.send_state(State::CreateStreams);
                    self.phase = Phase::Streams;
                    self.deadline = Some(now + STREAMS_TIMEOUT);
                    true
                }
            },
            Phase::Streams | Phase::Running | Phase::Display => {
                let Some(&b) = self.buf.first() else {
                    return false;
                };
                self.buf.remove(0);
                let state = match State::from_byte(b) {
                    Ok(s) => s,
                    Err(e) => {
                        self.fail(e);
                        return false;
                    }
                };
                match (self.phase, state) {
                    (_, State::ClientTerminate) => {
                        self.fail("iperf3 client terminated the test (CLIENT_TERMINATE)".into());
                        false
                    }
                    (Phase::Running, State::TestEnd) => {
                        self.actions.push_back(Action::StopStreams);
                        self.phase = Phase::Stopping;
                        self.deadline = Some(now + RESULTS_TIMEOUT);
                        true
                    }
                    (Phase::Display, State::IperfDone) => {
                        let client = self.client_results.take();
                        self.finish(client);
                        false
                    }
                    (phase, s) => {
                        self.fail(format!("iperf3 state {s:?} out of turn in phase {phase:?}"));
                        false
                    }
                }
            }
            // The client waits for EXCHANGE_RESULTS before it sends: keep what came.
            Phase::Stopping => false,
            Phase::ClientResults => match self.take_parsed(Results::parse) {
                None => false,
                Some(r) => {
                    self.client_results = Some(r);
                    let ours = self.ours.take().map(|o| frame(&o)).unwrap_or_default();
                    self.actions.push_back(Action::Send(ours));
                    self.send_state(State::DisplayResults);
                    self.phase = Phase::Display;
                    self.deadline = Some(now + RESULTS_TIMEOUT);
                    true
                }
            },
            Phase::Done | Phase::Failed => false,
        }
    }

    /// Refuses the test with `SERVER_ERROR` (before any stream exists).
    fn server_error(&mut self, e: ServerError) {
        self.actions.push_back(Action::Send(e.wire()));
        self.actions.push_back(Action::Fail(e.why));
        self.phase = Phase::Failed;
        self.deadline = None;
        self.buf.clear();
    }

    fn finish(&mut self, client: Option<Results>) {
        if let Some(c) = client {
            self.actions.push_back(Action::Done(Box::new(c)));
        }
        self.phase = Phase::Done;
        self.deadline = None;
    }

    fn send_state(&mut self, s: State) {
        self.actions.push_back(Action::Send(vec![s.byte()]));
    }

    /// A length-prefixed JSON message, once whole; `Err` for a bad length.
    /// A whole JSON message, parsed; `None` while it is not all here, or when it failed the
    /// test (too long, or `parse` refused it).
    fn take_parsed<T>(&mut self, parse: fn(&[u8]) -> Result<T, String>) -> Option<T> {
        match self
            .take_json()
            .and_then(|j| j.map(|j| parse(&j)).transpose())
        {
            Ok(v) => v,
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    fn take_json(&mut self) -> Result<Option<Vec<u8>>, String> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let n = json_len([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])?;
        if self.buf.len() < 4 + n {
            return Ok(None);
        }
        let json = self.buf[4..4 + n].to_vec();
        self.buf.drain(..4 + n);
        Ok(Some(json))
    }

    /// A stream connected and sent `cookie`, its connections taken in the order they
    /// joined: `Ok` with its id when it belongs to this test now, else the one-line refusal
    /// for that stream (the test goes on).
    pub fn stream_connected(&mut self, now: Instant, cookie: &Cookie) -> Result<i64, String> {
        let order = self.stream_ids.len() as u64;
        self.stream_joined(now, cookie, order).map(stream_id)
    }

    /// A stream connected and sent `cookie`; `accepted` orders it among the test's streams
    /// (the order the listener accepted them, which is the order the client connected them:
    /// threads may read the cookies in another). `Ok` with its ticket (the streams before it
    /// that joined) when it belongs to this test, else the one-line refusal for that stream.
    /// Its [`Role`] is known once all streams are in ([`Server::stream_role`]).
    pub fn stream_joined(
        &mut self,
        now: Instant,
        cookie: &Cookie,
        accepted: u64,
    ) -> Result<usize, String> {
        if self.cookie.as_ref() != Some(cookie) {
            return Err(format!(
                "iperf3 stream cookie {} belongs to no test",
                cookie.as_str()
            ));
        }
        let want = self.params.as_ref().map_or(0, |p| p.streams()) as usize;
        if self.phase != Phase::Streams || self.stream_ids.len() >= want {
            return Err("iperf3 stream arrived after its test's streams were complete".into());
        }
        // iperf3 numbers its streams 1, 3, 4, 5 … (iperf_add_stream), in connection order.
        let ticket = self.stream_ids.len();
        self.stream_ids.push(stream_id(ticket));
        self.accepted.push(accepted);
        if self.stream_ids.len() == want {
            let p = self.params.as_ref().expect("params read before streams");
            let mut by_accept: Vec<usize> = (0..want).collect();
            by_accept.sort_by_key(|&t| self.accepted[t]);
            self.roles = vec![
                Role {
                    id: 0,
                    sends: false
                };
                want
            ];
            for (position, &t) in by_accept.iter().enumerate() {
                self.roles[t] = Role {
                    id: stream_id(position),
                    sends: sink_sends(p, position),
                };
            }
            let reverse = p.reverse;
            self.deadline =
                (p.time > 0).then(|| now + Duration::from_secs(p.time + p.omit) + RUN_GRACE);
            self.actions.push_back(Action::StartStreams { reverse });
            self.send_state(State::TestStart);
            self.send_state(State::TestRunning);
            self.phase = Phase::Running;
            // Bytes that came early (a fast TEST_END) wait in the buffer.
            while !self.over() && self.step(now) {}
        }
        Ok(ticket)
    }

    /// The role of the stream that joined with `ticket`, once all the test's streams are in.
    pub fn stream_role(&self, ticket: usize) -> Option<Role> {
        self.roles.get(ticket).copied()
    }

    /// The streams stopped, with the sink's own figures (`streams` in the order of
    /// [`Server::stream_ids`]).
    pub fn streams_stopped(&mut self, now: Instant, ours: Results) {
        if self.phase != Phase::Stopping {
            return;
        }
        self.ours = Some(ours);
        self.send_state(State::ExchangeResults);
        self.phase = Phase::ClientResults;
        self.deadline = Some(now + RESULTS_TIMEOUT);
        while !self.over() && self.step(now) {}
    }
}
