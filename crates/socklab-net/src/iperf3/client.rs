//! One test of socklab's client against an unmodified `iperf3 -s`, sans I/O (`bulk --to
//! iperf3://HOST:PORT`, issue 27 part 2): the cookie, the parameters, and what to do on each
//! state byte the server sends. The caller owns the sockets: it writes what
//! [`Action::Send`] hands it, connects the streams on [`Action::ConnectStreams`], starts
//! them on [`Action::StartStreams`], ends the test with [`Client::end_test`] and answers
//! [`Action::WantResults`] with its own figures. Every wait has a deadline
//! ([`Client::poll_timeout`], [`Client::tick`]).
//!
//! The client's side of the exchange (esnet/iperf `src/iperf_client_api.c`,
//! `iperf_handle_message_client` and `iperf_connect`; `src/iperf_api.c`,
//! `iperf_exchange_results`), as Debian's 3.12 server answers it on loopback:
//!
//! 1. connect, send the cookie (37 bytes); the server answers `PARAM_EXCHANGE` (9), or
//!    `ACCESS_DENIED` (-1) when it is running another test;
//! 2. send the parameters; the server answers `CREATE_STREAMS` (10);
//! 3. connect the streams, each sending the cookie first (with `bidirectional`, the streams
//!    the client sends on first); the server answers `TEST_START` (1), `TEST_RUNNING` (2);
//! 4. the streams flow until the client sends `TEST_END` (4); the server closes its ends of
//!    the streams and answers `EXCHANGE_RESULTS` (13);
//! 5. send the client's results, read the server's; the server sends `DISPLAY_RESULTS` (14);
//! 6. send `IPERF_DONE` (16) and close.
//!
//! `SERVER_TERMINATE` (11), `SERVER_ERROR` (-2, two 4-byte big-endian integers follow: iperf3's
//! error number and `errno`) and a closed control connection end the test at any point, each
//! with a one-line reason.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::proto::{json_len, Cookie, Results, State, COOKIE_ALPHABET, COOKIE_LEN};

/// How long each step of the exchange may take (the server's answer to the cookie, the
/// parameters, the streams, `TEST_END`, each part of the results exchange).
pub const STEP_WAIT: Duration = Duration::from_secs(10);

/// A new cookie: 36 characters of iperf3's alphabet from `seed` (mixed, so that near seeds
/// give unrelated cookies), like 3.12's `make_cookie`.
pub fn make_cookie(seed: u64) -> Cookie {
    let mut x = seed;
    let mut c = [0u8; 36];
    for b in c.iter_mut() {
        // splitmix64: one draw per character.
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        *b = COOKIE_ALPHABET[(z % COOKIE_ALPHABET.len() as u64) as usize];
    }
    Cookie(c)
}

/// The cookie as the 37 bytes on the wire.
pub fn cookie_bytes(c: &Cookie) -> [u8; COOKIE_LEN] {
    let mut b = [0u8; COOKIE_LEN];
    b[..36].copy_from_slice(&c.0);
    b
}

/// The id iperf3 gives the stream connected `index`-th (from 0): 1, 3, 4, 5 …
/// (`iperf_add_stream`); the ids in the client's results must be the server's.
pub fn stream_id(index: u32) -> i64 {
    if index == 0 {
        1
    } else {
        i64::from(index) + 2
    }
}

/// The parameters the client sends (`send_parameters`): only keys iperf3 3.x knows, so any
/// 3.x server reads them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ClientParams {
    /// A TCP test.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tcp: bool,
    /// A UDP test.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub udp: bool,
    /// Seconds the server leaves out at the start (socklab sends 0).
    pub omit: u64,
    /// Seconds of the test (0 when `num` bounds it).
    pub time: u64,
    /// Bytes of the test.
    pub num: u64,
    /// Blocks of the test (socklab sends 0).
    pub blockcount: u64,
    /// Streams (each way with `bidirectional`).
    pub parallel: u32,
    /// The server sends.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reverse: bool,
    /// Both send.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub bidirectional: bool,
    /// `TCP_NODELAY` on the server's streams too.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub nodelay: bool,
    /// Bytes per read or write on the server's side (per datagram over UDP).
    pub len: u64,
    /// UDP: the sender's rate in bits/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<u64>,
    /// `SO_MAX_PACING_RATE` of the server's sending sockets, bits/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fqrate: Option<u64>,
    /// The server's sending sockets use `sendfile` (iperf3 `-Z`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<u64>,
    /// The congestion control of the server's sockets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// UDP: 64-bit packet counters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_counters_64bit: Option<u64>,
    /// The pacing timer in µs (3.12's default 1000).
    pub pacing_timer: u64,
}

/// Why a test against an iperf3 server did not end well; [`ClientError::message`] says it
/// in one line.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientError {
    /// `ACCESS_DENIED`: the server runs another test (or refused the cookie).
    Busy,
    /// `SERVER_ERROR`, with iperf3's error number and `errno`.
    ServerError { code: i32, errno: i32 },
    /// `SERVER_TERMINATE`.
    Terminated,
    /// The server closed the control connection while the client waited for `what`.
    Closed { what: &'static str },
    /// No `what` within [`STEP_WAIT`].
    Timeout { what: &'static str },
    /// The server sent what the protocol does not allow here.
    Protocol(String),
}

impl ClientError {
    /// The reason in one line, naming the server at `peer`.
    pub fn message(&self, peer: &str) -> String {
        match self {
            ClientError::Busy => format!("iperf3 server at {peer} is busy with another test"),
            ClientError::ServerError { code, errno } => {
                let os = if *errno != 0 {
                    format!(", errno {errno}: {}", std::io::Error::from_raw_os_error(*errno))
                } else {
                    String::new()
                };
                format!("iperf3 server at {peer} failed the test: iperf3 error {code}{os} (its own log says more)")
            }
            ClientError::Terminated => {
                format!("iperf3 server at {peer} ended the test (SERVER_TERMINATE)")
            }
            ClientError::Closed { what } => format!(
                "iperf3 server at {peer} closed the control connection while socklab waited for {what}"
            ),
            ClientError::Timeout { what } => format!(
                "iperf3 server at {peer} sent no {what} within {}s",
                STEP_WAIT.as_secs()
            ),
            ClientError::Protocol(m) => format!("iperf3 server at {peer}: {m}"),
        }
    }
}

/// What the caller does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Write these bytes on the control connection.
    Send(Vec<u8>),
    /// Connect the streams in order (up streams first), each sending the cookie first; then
    /// call [`Client::streams_connected`].
    ConnectStreams {
        /// The cookie each stream starts with.
        cookie: [u8; COOKIE_LEN],
        /// How many connections (`parallel`, twice that with `bidirectional`).
        count: u32,
    },
    /// The streams may flow (`TEST_RUNNING`); the test's clock starts now.
    StartStreams,
    /// The server asks for the client's results: call [`Client::results`].
    WantResults,
    /// The test is over (`IPERF_DONE` is among the sends before this): the server's results.
    Done(Box<Results>),
    /// The test failed; close the connections.
    Fail(ClientError),
}

/// Where the exchange stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for `PARAM_EXCHANGE`.
    Params,
    /// Waiting for `CREATE_STREAMS`.
    CreateStreams,
    /// The caller connects the streams.
    Connecting,
    /// Waiting for `TEST_START`.
    Start,
    /// Waiting for `TEST_RUNNING`.
    Running,
    /// The streams flow until [`Client::end_test`].
    Flowing,
    /// `TEST_END` sent; waiting for `EXCHANGE_RESULTS`.
    Exchange,
    /// The caller gathers its results.
    Gathering,
    /// Waiting for the server's results message.
    ServerResults,
    /// Waiting for `DISPLAY_RESULTS`.
    Display,
    /// Over.
    Done,
    /// Failed.
    Failed,
}

/// One test's client side.
#[derive(Debug)]
pub struct Client {
    cookie: Cookie,
    params: Vec<u8>,
    count: u32,
    phase: Phase,
    inbuf: Vec<u8>,
    actions: VecDeque<Action>,
    deadline: Option<Instant>,
    server_results: Option<Results>,
}

impl Client {
    /// A test with `cookie` that will send `params`: the first action sends the cookie.
    pub fn new(now: Instant, cookie: Cookie, params: &ClientParams) -> Client {
        let count = params.parallel * if params.bidirectional { 2 } else { 1 };
        let mut c = Client {
            cookie,
            params: super::proto::frame(params),
            count,
            phase: Phase::Params,
            inbuf: Vec::new(),
            actions: VecDeque::new(),
            deadline: Some(now + STEP_WAIT),
            server_results: None,
        };
        c.actions
            .push_back(Action::Send(cookie_bytes(&cookie).to_vec()));
        c
    }

    /// Where the exchange stands.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The test's cookie.
    pub fn cookie(&self) -> Cookie {
        self.cookie
    }

    /// The next thing to do, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When [`Client::tick`] must be called at the latest (`None`: no wait is pending, the
    /// streams flow or the caller works).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    /// Looks at the clock: a step past its deadline fails the test.
    pub fn tick(&mut self, now: Instant) {
        if self.deadline.is_some_and(|d| now >= d) {
            let what = self.waiting_for();
            self.fail(ClientError::Timeout { what });
        }
    }

    /// What the client waits for in this phase (for the messages).
    fn waiting_for(&self) -> &'static str {
        match self.phase {
            Phase::Params => "PARAM_EXCHANGE",
            Phase::CreateStreams => "CREATE_STREAMS",
            Phase::Start => "TEST_START",
            Phase::Running => "TEST_RUNNING",
            Phase::Exchange => "EXCHANGE_RESULTS",
            Phase::ServerResults => "results message",
            Phase::Display => "DISPLAY_RESULTS",
            Phase::Connecting | Phase::Gathering | Phase::Flowing => "the streams",
            Phase::Done | Phase::Failed => "nothing",
        }
    }

    fn fail(&mut self, e: ClientError) {
        if matches!(self.phase, Phase::Done | Phase::Failed) {
            return;
        }
        self.phase = Phase::Failed;
        self.deadline = None;
        self.actions.push_back(Action::Fail(e));
    }

    /// The server closed the control connection.
    pub fn control_closed(&mut self) {
        let what = self.waiting_for();
        self.fail(ClientError::Closed { what });
    }

    /// Bytes read from the control connection.
    pub fn control_bytes(&mut self, now: Instant, bytes: &[u8]) {
        if matches!(self.phase, Phase::Done | Phase::Failed) {
            return;
        }
        self.inbuf.extend_from_slice(bytes);
        while self.step(now) {}
    }

    /// Takes what the buffer holds for this phase; `true` when it took something.
    fn step(&mut self, now: Instant) -> bool {
        // What comes while the caller connects the streams or gathers its results waits for
        // it (3.12 sends TEST_START as soon as the last stream is accepted).
        if matches!(
            self.phase,
            Phase::Done | Phase::Failed | Phase::Connecting | Phase::Gathering
        ) || self.inbuf.is_empty()
        {
            return false;
        }
        if self.phase == Phase::ServerResults {
            return self.take_results(now);
        }
        let b = self.inbuf[0];
        let state = match State::from_byte(b) {
            Ok(s) => s,
            Err(why) => {
                self.fail(ClientError::Protocol(why));
                return false;
            }
        };
        if state == State::ServerError {
            if self.inbuf.len() < 9 {
                return false;
            }
            let int = |i: usize| {
                i32::from_be_bytes([
                    self.inbuf[i],
                    self.inbuf[i + 1],
                    self.inbuf[i + 2],
                    self.inbuf[i + 3],
                ])
            };
            let (code, errno) = (int(1), int(5));
            self.fail(ClientError::ServerError { code, errno });
            return false;
        }
        self.inbuf.remove(0);
        match (state, self.phase) {
            (State::AccessDenied, _) => self.fail(ClientError::Busy),
            (State::ServerTerminate, _) => self.fail(ClientError::Terminated),
            (State::ParamExchange, Phase::Params) => {
                let p = std::mem::take(&mut self.params);
                self.actions.push_back(Action::Send(p));
                self.phase = Phase::CreateStreams;
                self.deadline = Some(now + STEP_WAIT);
            }
            (State::CreateStreams, Phase::CreateStreams) => {
                self.actions.push_back(Action::ConnectStreams {
                    cookie: cookie_bytes(&self.cookie),
                    count: self.count,
                });
                self.phase = Phase::Connecting;
                self.deadline = None;
            }
            (State::TestStart, Phase::Start) => {
                self.phase = Phase::Running;
                self.deadline = Some(now + STEP_WAIT);
            }
            (State::TestRunning, Phase::Running) => {
                self.actions.push_back(Action::StartStreams);
                self.phase = Phase::Flowing;
                self.deadline = None;
            }
            (State::ExchangeResults, Phase::Exchange) => {
                self.actions.push_back(Action::WantResults);
                self.phase = Phase::Gathering;
                self.deadline = None;
            }
            (State::DisplayResults, Phase::Display) => {
                self.actions
                    .push_back(Action::Send(vec![State::IperfDone.byte()]));
                let r = self.server_results.take().unwrap_or_else(|| Results {
                    cpu_util_total: 0.0,
                    cpu_util_user: 0.0,
                    cpu_util_system: 0.0,
                    sender_has_retransmits: -1,
                    congestion_used: None,
                    server_output_text: None,
                    streams: Vec::new(),
                });
                self.actions.push_back(Action::Done(Box::new(r)));
                self.phase = Phase::Done;
                self.deadline = None;
            }
            (s, p) => self.fail(ClientError::Protocol(format!(
                "state {} ({s:?}) out of turn while waiting for {} (phase {p:?})",
                b as i8,
                self.waiting_for()
            ))),
        }
        true
    }

    /// The server's results message: a 4-byte length and JSON.
    fn take_results(&mut self, now: Instant) -> bool {
        if self.inbuf.len() < 4 {
            return false;
        }
        let n = match json_len([self.inbuf[0], self.inbuf[1], self.inbuf[2], self.inbuf[3]]) {
            Ok(n) => n,
            Err(why) => {
                self.fail(ClientError::Protocol(why));
                return false;
            }
        };
        if self.inbuf.len() < 4 + n {
            return false;
        }
        let json: Vec<u8> = self.inbuf.drain(..4 + n).skip(4).collect();
        match Results::parse(&json) {
            Ok(r) => {
                self.server_results = Some(r);
                self.phase = Phase::Display;
                self.deadline = Some(now + STEP_WAIT);
                true
            }
            Err(why) => {
                self.fail(ClientError::Protocol(why));
                false
            }
        }
    }

    /// Every stream is connected (and has sent the cookie).
    pub fn streams_connected(&mut self, now: Instant) {
        if self.phase == Phase::Connecting {
            self.phase = Phase::Start;
            self.deadline = Some(now + STEP_WAIT);
            // TEST_START may have come with CREATE_STREAMS' read.
            while self.step(now) {}
        }
    }

    /// The client's streams are done: send `TEST_END`.
    pub fn end_test(&mut self, now: Instant) {
        if self.phase == Phase::Flowing {
            self.actions
                .push_back(Action::Send(vec![State::TestEnd.byte()]));
            self.phase = Phase::Exchange;
            self.deadline = Some(now + STEP_WAIT);
            while self.step(now) {}
        }
    }

    /// The client's results, asked for by [`Action::WantResults`]: they are sent, and the
    /// server's awaited.
    pub fn results(&mut self, now: Instant, ours: &Results) {
        if self.phase == Phase::Gathering {
            self.actions
                .push_back(Action::Send(super::proto::frame(ours)));
            self.phase = Phase::ServerResults;
            self.deadline = Some(now + STEP_WAIT);
            while self.step(now) {}
        }
    }

    /// The client gives up (Ctrl-C, a failed stream): the bytes that tell the server
    /// (`CLIENT_TERMINATE`), so it is free for the next test at once; none when the exchange is
    /// over or the server already ended it.
    pub fn abort(&mut self) -> Option<Vec<u8>> {
        if matches!(self.phase, Phase::Done | Phase::Failed) {
            return None;
        }
        self.phase = Phase::Failed;
        self.deadline = None;
        Some(vec![State::ClientTerminate.byte()])
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
