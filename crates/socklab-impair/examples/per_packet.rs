//! The emulator's own cost per packet (no I/O): packets of 1500 bytes enter one every
//! `gap` ns of simulated time and are polled as they fall due, buffers recycled as the TUN
//! driver does. Prints ns of CPU per packet for a few specs (the thread's CPU time from
//! /proc/thread-self/schedstat where there is one, so other load on the machine does not count;
//! else wall time).
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

fn run(spec: &str, packets: u64, gap_ns: u64) -> f64 {
    let spec: LinkSpec = spec.parse().expect("spec");
    let mut e = Emulator::new(spec, 1);
    let mut pool: Vec<Vec<u8>> = (0..4096).map(|_| vec![0x45u8; 1500]).collect();
    let wall = Instant::now();
    let t0 = cpu_ns(wall);
    let mut now = 0u64;
    for _ in 0..packets {
        now += gap_ns;
        let p = pool.pop().unwrap_or_else(|| vec![0x45u8; 1500]);
        e.enqueue(now, p);
        while let Some(t) = e.poll_timeout().filter(|&t| t <= now) {
            match e.poll_transmit(t.max(now)) {
                Some(p) => pool.push(p),
                None => break,
            }
        }
    }
    let ns = (cpu_ns(wall) - t0) as f64 / packets as f64;
    std::hint::black_box(e.stats());
    ns
}

fn main() {
    let packets: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let only = std::env::args().nth(2);
    println!("{:<48} {:>10}", "spec", "ns/packet");
    for spec in [
        "",
        "rate 900mbit",
        "delay 10ms rate 900mbit",
        "delay 10ms 1ms loss 1%",
        "rate 900mbit aqm codel",
        "rate 900mbit aqm fq_codel",
        "rate 900mbit aqm pie",
        "rate 900mbit@0s 500mbit@1s",
        "delay 1ms slot 1ms packets 32",
    ] {
        if only.as_deref().is_some_and(|o| o != spec) {
            continue;
        }
        match spec.parse::<LinkSpec>() {
            Ok(_) => println!(
                "{:<48} {:>10.1}",
                format!("'{spec}'"),
                run(spec, packets, 13_400)
            ),
            Err(e) => println!("{:<48} {:>10}", format!("'{spec}'"), format!("({e})")),
        }
    }
}
