//! A real sink on 127.0.0.1 in a thread, for the loopback tests: its reports on a channel,
//! stopped and joined when dropped.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use socklab_net::sink::{ConnReport, Sink, SinkConfig};

pub struct TestSink {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    reports: mpsc::Receiver<ConnReport>,
    handle: Option<JoinHandle<()>>,
}

impl TestSink {
    pub fn start(cfg: SinkConfig) -> TestSink {
        let mut sink = Sink::bind(cfg).unwrap();
        let addr = sink.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, reports) = mpsc::channel();
        let s2 = stop.clone();
        let handle = std::thread::spawn(move || {
            sink.serve(&|| s2.load(Ordering::SeqCst), &mut |r| {
                let _ = tx.send(r.clone());
            })
            .unwrap();
        });
        TestSink {
            addr,
            stop,
            reports,
            handle: Some(handle),
        }
    }

    /// The next connection's report, within `limit` (a panic naming it otherwise).
    pub fn report_within(&self, limit: Duration) -> ConnReport {
        self.reports
            .recv_timeout(limit)
            .unwrap_or_else(|_| panic!("no connection report within {limit:?}"))
    }

    /// A report that has come already, if any.
    #[allow(dead_code)]
    pub fn try_report(&self) -> Option<ConnReport> {
        self.reports.try_recv().ok()
    }

    /// The reports of `n` connections, in the order they ended (20 s each at most).
    #[allow(dead_code)]
    pub fn reports(&self, n: usize) -> Vec<ConnReport> {
        (0..n)
            .map(|_| self.report_within(Duration::from_secs(20)))
            .collect()
    }
}

impl Drop for TestSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
