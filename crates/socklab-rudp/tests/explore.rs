//! Prints a goodput table from the simulator (run with `--ignored --nocapture`); not a test of
//! timing: the assertions about goodput live in `simulate.rs`.
mod sim;

#[test]
#[ignore]
fn goodput_table() {
    // LIMIT=2000 gives the bottleneck a realistic queue (about 2.4 BDP) instead of a huge one.
    let limit = &format!(
        " limit {}",
        std::env::var("LIMIT").unwrap_or_else(|_| "100000".into())
    );
    for loss in [0.0, 5.0, 10.0, 15.0] {
        let up = format!("rate 100mbit delay 50ms loss {loss}%{limit}");
        let down = format!("delay 50ms{limit}");
        let mut setup = sim::Setup::new(&up, &down, vec![125_000_000], 1);
        setup.limit_ns = 60_000_000_000;
        let t = std::time::Instant::now();
        let o = sim::run(&setup, 2_000_000_000);
        let ideal = 100e6 * (1.0 - loss / 100.0);
        println!(
            "loss {loss:>4}%: complete {} elapsed {:.2}s goodput {:.1} Mbit/s steady {:.1} ({:.0}% of ideal) lost {} spurious {} pto {} retx {} rl {:.3} cong {} cwnd {} pacing {:.1}Mb  [{} steps, {:.2}s wall]",
            o.complete,
            o.elapsed_ns as f64 / 1e9,
            o.goodput_bps / 1e6,
            o.steady_goodput_bps / 1e6,
            100.0 * o.steady_goodput_bps / ideal,
            o.client.lost_packets,
            o.client.spurious_losses,
            o.client.probe_timeouts,
            o.client.retransmitted_packets,
            o.client.random_loss_ppm as f64 / 1e6,
            o.client.congestion_events,
            o.client.cwnd,
            o.client.pacing_rate as f64 * 8.0 / 1e6,
            o.steps,
            t.elapsed().as_secs_f64(),
        );
    }
}

/// The start-up table (issue 29): 20 MB over 100 Mbit/s, 100 ms RTT, a 2000-packet queue, total
/// time against the ideal (two RTTs: handshake, last byte and its ACK; + size at rate x (1 - loss)).
#[test]
#[ignore]
fn startup_table() {
    for loss in [0.0, 5.0, 10.0, 15.0] {
        for seed in [1, 2, 3] {
            let up = format!("rate 100mbit delay 50ms loss {loss}% limit 2000");
            let mut setup = sim::Setup::new(&up, "delay 50ms", vec![20_000_000], seed);
            setup.limit_ns = 60_000_000_000;
            let o = sim::run(&setup, 0);
            let ideal = 0.2 + 20e6 * 8.0 / (100e6 * (1.0 - loss / 100.0));
            let t = o.elapsed_ns as f64 / 1e9;
            println!(
                "loss {loss:>4}% seed {seed}: complete {} elapsed {t:.3}s ideal {ideal:.3}s ({:.2} of ideal) lost {} retx {} rl {:.3} cong {} overflow {}",
                o.complete,
                ideal / t,
                o.client.lost_packets,
                o.client.retransmitted_packets,
                o.client.random_loss_ppm as f64 / 1e6,
                o.client.congestion_events,
                o.up_stats.queue_dropped,
            );
            if std::env::var("RAMP").is_ok_and(|v| v == format!("{loss}:{seed}")) {
                for (t, r, cwnd, pace) in &o.progress {
                    println!(
                        "  t {:.1}s received {:.2} MB cwnd {} KB pacing {:.1} Mbit/s",
                        *t as f64 / 1e9,
                        *r as f64 / 1e6,
                        cwnd / 1000,
                        *pace as f64 * 8.0 / 1e6
                    );
                }
            }
        }
    }
}
