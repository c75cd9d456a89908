//! Serves for a bounded time, for quick measurements while the `socklab serve` CLI lands:
//!
//! ```text
//! cargo run --release -p socklab-net --example serve -- DESIGN HANDLER PORT SECONDS [WORKERS]
//! ```
//!
//! Prints the listening address, then the report when the time is up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use socklab_net::server::{serve, ServeConfig};

static STOP: AtomicBool = AtomicBool::new(false);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        return Err("usage: serve DESIGN HANDLER PORT SECONDS [WORKERS]".into());
    }
    let secs: f64 = args[3].parse()?;
    let workers = match args.get(4) {
        Some(w) => w.parse()?,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let cfg = ServeConfig {
        bind: format!("127.0.0.1:{}", args[2]).parse()?,
        design: args[0].parse()?,
        workers,
        handler: args[1].parse()?,
        body: 100,
        backlog: 1024,
        opts: Default::default(),
        idle_timeout: None,
    };
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs_f64(secs.clamp(0.0, 600.0)));
        STOP.store(true, Ordering::Relaxed);
    });
    let report = serve(&cfg, &STOP, &mut |a| println!("listening on {a}"))?;
    print!("{}", report.human());
    println!("{}", report.stats_line());
    Ok(())
}
