//! The fork-based primitives of `socklab_sys::procs`, run without libtest's threads (`fork`
//! refuses in a multi-threaded process): a forked child adds to a shared counter, the fcntl
//! lock and the process-shared mutex exclude across processes, the child's exit is reaped.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use socklab_sys::procs::{
    exit_now, fork, reap, reap_any, FileLock, Forked, SharedCounters, SharedMutex,
};

fn child_increments_shared_counter() {
    let c = SharedCounters::new(2).unwrap();
    let mut pids = Vec::new();
    for _ in 0..3 {
        match fork().unwrap() {
            Forked::Child => {
                for _ in 0..1000 {
                    c.get(1).fetch_add(1, Ordering::Relaxed);
                }
                exit_now(7);
            }
            Forked::Parent(pid) => pids.push(pid),
        }
    }
    for pid in pids {
        assert_eq!(reap(pid).unwrap().code, 7);
    }
    assert_eq!(c.get(1).load(Ordering::Relaxed), 3000);
    assert_eq!(c.get(0).load(Ordering::Relaxed), 0);
    assert!(reap_any().unwrap().is_none(), "no child left");
}

fn file_lock_excludes_across_processes() {
    let lock = FileLock::new().unwrap();
    let flags = SharedCounters::new(2).unwrap();
    let pid = match fork().unwrap() {
        Forked::Child => {
            let g = lock.lock().unwrap();
            flags.get(0).store(1, Ordering::SeqCst);
            // Hold until the parent has tried (bounded only against a hang).
            let t0 = Instant::now();
            while flags.get(1).load(Ordering::SeqCst) == 0 && t0.elapsed() < Duration::from_secs(60)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(g);
            exit_now(0);
        }
        Forked::Parent(pid) => pid,
    };
    let t0 = Instant::now();
    while flags.get(0).load(Ordering::SeqCst) == 0 && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        flags.get(0).load(Ordering::SeqCst),
        1,
        "the child never took the lock"
    );
    assert!(
        lock.try_lock().unwrap().is_none(),
        "the child holds the lock"
    );
    flags.get(1).store(1, Ordering::SeqCst);
    assert_eq!(reap(pid).unwrap().code, 0);
    assert!(
        lock.try_lock().unwrap().is_some(),
        "free after the child let go"
    );
}

fn shared_mutex_excludes_across_processes() {
    let m = SharedMutex::new().unwrap();
    let c = SharedCounters::new(1).unwrap();
    let mut pids = Vec::new();
    for _ in 0..3 {
        match fork().unwrap() {
            Forked::Child => {
                for _ in 0..300 {
                    let _g = m.lock().unwrap();
                    let v = c.get(0).load(Ordering::Relaxed);
                    std::hint::spin_loop();
                    c.get(0).store(v + 1, Ordering::Relaxed);
                }
                exit_now(0);
            }
            Forked::Parent(pid) => pids.push(pid),
        }
    }
    for pid in pids {
        assert_eq!(reap(pid).unwrap().code, 0);
    }
    assert_eq!(c.get(0).load(Ordering::Relaxed), 900);
}

fn shared_mutex_recovers_from_a_dead_holder() {
    let m = SharedMutex::new().unwrap();
    let pid = match fork().unwrap() {
        Forked::Child => {
            let g = m.lock().unwrap();
            std::mem::forget(g);
            exit_now(0);
        }
        Forked::Parent(pid) => pid,
    };
    reap(pid).unwrap();
    drop(m.lock().unwrap());
    drop(m.lock().unwrap());
}

fn main() {
    let tests: [(&str, fn()); 4] = [
        (
            "child_increments_shared_counter",
            child_increments_shared_counter,
        ),
        (
            "file_lock_excludes_across_processes",
            file_lock_excludes_across_processes,
        ),
        (
            "shared_mutex_excludes_across_processes",
            shared_mutex_excludes_across_processes,
        ),
        (
            "shared_mutex_recovers_from_a_dead_holder",
            shared_mutex_recovers_from_a_dead_holder,
        ),
    ];
    for (name, f) in tests {
        f();
        println!("test {name} ... ok");
    }
}
