//! The deterministic simulator: a client and a server [`Connection`] joined by two
//! [`Emulator`]s (socklab's netem model), in simulated time. The client sends a stream of
//! pseudo-random bytes (a function of the offset, so the receiver checks every byte it gets);
//! the run ends when the server has every byte and the client saw it acknowledged, or when the
//! simulated time limit passes (which the tests treat as a livelock).

#![allow(dead_code)]

use std::net::SocketAddr;

use socklab_impair::{Emulator, LinkSpec};
use socklab_rudp::{wire, CloseReason, Config, Connection, Event, Server, ServerAction, Stats};

/// The byte at `offset` of stream `stream` in the simulated files.
pub fn byte_at(stream: u32, offset: u64) -> u8 {
    let x = offset
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(u64::from(stream) << 32);
    ((x >> 29) ^ (x >> 47)) as u8
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Link from client to server (the data direction).
    pub up: LinkSpec,
    /// Link from server to client (the ACK direction).
    pub down: LinkSpec,
    /// File sizes: stream i + 1 carries a file of `files[i]` bytes.
    pub files: Vec<u64>,
    pub config: Config,
    pub seed: u64,
    /// Give up at this simulated time (ns).
    pub limit_ns: u64,
    /// Chunk size the application writes.
    pub write_size: usize,
}

impl Setup {
    pub fn new(up: &str, down: &str, files: Vec<u64>, seed: u64) -> Setup {
        Setup {
            up: up.parse().expect("up spec"),
            down: down.parse().expect("down spec"),
            files,
            config: Config::default(),
            seed,
            limit_ns: 600_000_000_000,
            write_size: 64 * 1024,
        }
    }
}

/// What happened.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Every byte arrived, checked, and the sender saw everything acknowledged.
    pub complete: bool,
    /// Simulated time from the client's start to completion (or the limit).
    pub elapsed_ns: u64,
    /// When the first stream byte arrived at the server.
    pub first_byte_ns: u64,
    /// Distinct file bytes the server received.
    pub received: u64,
    /// Bytes that arrived with the wrong value (must be 0).
    pub wrong_bytes: u64,
    /// Bytes delivered twice by `read` (must be 0).
    pub duplicate_deliveries: u64,
    pub client: Stats,
    pub server: Stats,
    pub client_close: Option<CloseReason>,
    /// Goodput from the first data byte to completion (bits/s).
    pub goodput_bps: f64,
    /// Goodput after `omit_ns` of the transfer (bits/s), like iperf3 --omit.
    pub steady_goodput_bps: f64,
    /// Per stream: packets that carried retransmitted data.
    pub retransmits: Vec<u64>,
    pub up_stats: socklab_impair::Stats,
    pub down_stats: socklab_impair::Stats,
    pub steps: u64,
    /// (time ns, distinct bytes received, client cwnd, client pacing rate bytes/s), every 100 ms
    /// of simulated time: the ramp, for the exploration tables.
    pub progress: Vec<(u64, u64, u64, u64)>,
}

/// Runs one transfer. `omit_ns`: start of the steady-state goodput window.
pub fn run(setup: &Setup, omit_ns: u64) -> Outcome {
    let client_addr: SocketAddr = "10.0.0.1:5000".parse().unwrap();
    let mut up = Emulator::new(setup.up.clone(), setup.seed);
    let mut down = Emulator::new(setup.down.clone(), setup.seed ^ 0xABCD_EF01);
    let mut endpoint = Server::new(setup.config.clone(), [7u8; 32]);
    let cid = setup.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
    let mut client = Connection::client(setup.config.clone(), cid, 0);
    let mut server: Option<Box<Connection>> = None;
    let total: u64 = setup.files.iter().sum();
    let mut have: Vec<socklab_rudp::rangeset::RangeSet> =
        vec![Default::default(); setup.files.len() + 1];
    let mut received = 0u64;
    let mut wrong = 0u64;
    let mut dups = 0u64;
    let mut first_byte = None;
    let mut at_omit: Option<(u64, u64)> = None;
    // Sender application state.
    let mut file = 0usize;
    let mut file_pos = 0u64;
    let mut wbuf = vec![0u8; setup.write_size];
    let mut rbuf = vec![0u8; 64 * 1024];
    let mut out = vec![0u8; 65_536];
    let mut now = 0u64;
    let mut done_at = None;
    let mut client_close = None;
    let mut steps = 0u64;
    let mut progress = Vec::new();
    loop {
        steps += 1;
        if now >= progress.len() as u64 * 100_000_000 {
            let st = client.stats();
            progress.push((now, received, st.cwnd, st.pacing_rate));
        }
        // Client application: write while there is room.
        if client.is_established() {
            while file < setup.files.len() {
                let size = setup.files[file];
                let n = ((size - file_pos) as usize).min(wbuf.len());
                if n > client.send_space() {
                    break;
                }
                let stream = file as u32 + 1;
                for (i, b) in wbuf[..n].iter_mut().enumerate() {
                    *b = byte_at(stream, file_pos + i as u64);
                }
                if n > 0 {
                    client.write(stream, file_pos, &wbuf[..n]).expect("write");
                }
                file_pos += n as u64;
                if file_pos >= size {
                    file += 1;
                    file_pos = 0;
                }
            }
        }
        // Server application: read and check.
        if let Some(s) = server.as_mut() {
            while let Some(chunk) = s.read(&mut rbuf) {
                let st = chunk.stream as usize;
                if st == 0 || st > setup.files.len() {
                    wrong += chunk.len as u64;
                    continue;
                }
                for (i, &b) in rbuf[..chunk.len].iter().enumerate() {
                    if b != byte_at(chunk.stream, chunk.offset + i as u64) {
                        wrong += 1;
                    }
                }
                let added = have[st].insert(chunk.offset..chunk.offset + chunk.len as u64);
                dups += chunk.len as u64 - added;
                received += added;
                first_byte.get_or_insert(now);
            }
            while s.poll_event().is_some() {}
        }
        while let Some(ev) = client.poll_event() {
            if let Event::Closed(r) = ev {
                client_close.get_or_insert(r);
            }
        }
        if omit_ns > 0 && at_omit.is_none() {
            if let Some(fb) = first_byte {
                if now >= fb + omit_ns {
                    at_omit = Some((now, received));
                }
            }
        }
        if done_at.is_none() && received == total && client.all_acked() && file == setup.files.len()
        {
            done_at = Some(now);
            client.close(now, socklab_rudp::CLOSE_OK, "done");
        }
        if done_at.is_some() && client.is_closed() {
            break;
        }
        if client.is_closed() && done_at.is_none() {
            break;
        }
        if now > setup.limit_ns {
            break;
        }
        // Transmit everything due.
        while let Some(n) = client.poll_transmit(now, &mut out) {
            up.enqueue(now, out[..n].to_vec());
        }
        if let Some(s) = server.as_mut() {
            while let Some(n) = s.poll_transmit(now, &mut out) {
                down.enqueue(now, out[..n].to_vec());
            }
        }
        // Deliver everything due.
        let mut delivered = false;
        while let Some(p) = up.poll_transmit(now) {
            delivered = true;
            let routed = server
                .as_ref()
                .is_some_and(|s| wire::peek_cid(&p) == Some(s.cid()));
            if routed {
                server.as_mut().unwrap().handle_datagram(now, &p);
            } else {
                match endpoint.handle_datagram(now, client_addr, &p, &mut out) {
                    ServerAction::Reply(n) => down.enqueue(now, out[..n].to_vec()),
                    ServerAction::Accept(c) => {
                        if server.is_none() {
                            server = Some(c);
                        }
                    }
                    ServerAction::Drop => {}
                }
            }
        }
        while let Some(p) = down.poll_transmit(now) {
            delivered = true;
            client.handle_datagram(now, &p);
        }
        if delivered {
            continue;
        }
        // Timers.
        let mut next = u64::MAX;
        for t in [
            client.poll_timeout(),
            server.as_ref().and_then(|s| s.poll_timeout()),
            up.poll_timeout(),
            down.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        {
            next = next.min(t);
        }
        if next == u64::MAX {
            break;
        }
        now = now.max(next);
        if client.poll_timeout().is_some_and(|t| t <= now) {
            client.handle_timeout(now);
        }
        if let Some(s) = server.as_mut() {
            if s.poll_timeout().is_some_and(|t| t <= now) {
                s.handle_timeout(now);
            }
        }
    }
    let elapsed = done_at.unwrap_or(now);
    let fb = first_byte.unwrap_or(0);
    let goodput = if elapsed > fb {
        received as f64 * 8e9 / (elapsed - fb) as f64
    } else {
        0.0
    };
    let steady = match at_omit {
        Some((t, r)) if elapsed > t => (received - r) as f64 * 8e9 / (elapsed - t) as f64,
        _ => goodput,
    };
    Outcome {
        complete: done_at.is_some(),
        elapsed_ns: elapsed,
        first_byte_ns: fb,
        received,
        wrong_bytes: wrong,
        duplicate_deliveries: dups,
        retransmits: (1..=setup.files.len() as u32)
            .map(|s| client.stream_retransmits(s))
            .collect(),
        client: client.stats(),
        server: server.as_ref().map(|s| s.stats()).unwrap_or_default(),
        client_close,
        goodput_bps: goodput,
        steady_goodput_bps: steady,
        up_stats: up.stats().clone(),
        down_stats: down.stats().clone(),
        steps,
        progress,
    }
}
