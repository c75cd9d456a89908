//! The emulator's own cost per packet (no I/O): packets of 1500 bytes enter one every
//! `gap` ns of simulated time and are polled as they fall due, buffers recycled as the TUN
//! driver does. Prints ns of CPU per packet for a few specs (the thread's CPU time from
//! /proc/thread-self/schedstat where there is one, so other load on the machine does not count;
//! else wall time).
//!
//! Rows marked `observed` run with the per-packet observer on and its events drained after
//! each arrival and each round of releases, as the TUN driver does while capturing.
//!
//! `cargo run --release -p socklab-impair --example per_packet [PACKETS [SPEC]]` (a SPEC: only
//! that one, e.g. for `valgrind --tool=callgrind` or `perf stat`)

use std::time::Instant;

use socklab_impair::{Emulator, LinkSpec};

/// The calling thread's CPU time, ns (Linux), or the wall clock's.
fn cpu_ns(wall: Instant) -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| wall.elapsed().as_nanos() as u64)
}

fn run(spec: &str, packets: u64, gap_ns: u64, observed: bool) -> f64 {
    let spec: LinkSpec = spec.parse().expect("spec");
    let mut e = Emulator::new(spec, 1);
    e.observe(observed);
    let mut events = 0u64;
    let mut pool: Vec<Vec<u8>> = (0..4096).map(|_| vec![0x45u8; 1500]).collect();
    let wall = Instant::now();
    let t0 = cpu_ns(wall);
    let mut now = 0u64;
    for _ in 0..packets {
        now += gap_ns;
        let p = pool.pop().unwrap_or_else(|| vec![0x45u8; 1500]);
        e.enqueue(now, p);
        if observed {
            events += e.drain_events().map(|ev| ev.packet & 1).sum::<u64>();
        }
        while let Some(t) = e.poll_timeout().filter(|&t| t <= now) {
            match e.poll_transmit(t.max(now)) {
                Some(p) => pool.push(p),
                None => break,
            }
        }
        if observed {
            events += e.drain_events().map(|ev| ev.packet & 1).sum::<u64>();
        }
    }
    let ns = (cpu_ns(wall) - t0) as f64 / packets as f64;
    std::hint::black_box((e.stats(), events));
    ns
}

fn main() {
    let packets: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let only = std::env::args().nth(2);
    println!("{:<48} {:>10}", "spec", "ns/packet");
    for (spec, observed) in [
        ("", false),
        ("rate 900mbit", false),
        ("delay 10ms rate 900mbit", false),
        ("delay 10ms 1ms loss 1%", false),
        ("rate 900mbit aqm codel", false),
        ("rate 900mbit aqm fq_codel", false),
        ("rate 900mbit aqm pie", false),
        ("rate 900mbit@0s 500mbit@1s", false),
        ("delay 1ms slot 1ms packets 32", false),
        ("delay 10ms 1ms loss 1%", true),
        ("rate 900mbit aqm fq_codel", true),
    ] {
        if only.as_deref().is_some_and(|o| o != spec) {
            continue;
        }
        let label = if observed {
            format!("'{spec}' observed")
        } else {
            format!("'{spec}'")
        };
        match spec.parse::<LinkSpec>() {
            Ok(_) => println!(
                "{:<48} {:>10.1}",
                label,
                run(spec, packets, 13_400, observed)
            ),
            Err(e) => println!("{:<48} {:>10}", label, format!("({e})")),
        }
    }
}
