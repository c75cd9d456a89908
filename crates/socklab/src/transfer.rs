//! `socklab transfer`: the server, the client, and the measured experiment (both sides spawned
//! by the Runner, like `bulk` and `pingpong`).

use socklab_lab::flags;
use socklab_lab::roles::transfer_args::{self as args, SendArgs, ServeArgs};
use socklab_lab::roles::{self, Say};
use socklab_lab::session::open_store;
use socklab_lab::workload::transfer;

use crate::cli::{TransferArgs, TransferCommand, TransferSendArgs, TransferServeArgs};
use crate::commands::{order_seed, run_and_print};
use crate::failure::{out, Failure};

pub fn transfer(a: TransferArgs, dry: bool) -> Result<(), Failure> {
    match a.action {
        Some(TransferCommand::Serve(s)) => serve(s, dry),
        Some(TransferCommand::Send(s)) => send(s, dry),
        None => experiment(a, dry),
    }
}

/// `transfer serve`: the role checks the arguments (its errors name keys, printed as flags).
fn serve(a: TransferServeArgs, dry: bool) -> Result<(), Failure> {
    let given = ServeArgs {
        proto: a.proto,
        port: a.port,
        bind: a.bind,
        dir: a.dir,
        tcp_cc: a.tcp_cc,
        max_sessions_per_source: a.max_sessions_per_source,
        once: a.once,
        max_sessions: a.max_sessions,
        idle_timeout: a.idle_timeout,
        max_file_size: a.max_file_size,
        partial_max_age: a.partial_max_age,
        remove_dir_at_exit: a.remove_dir_at_exit,
    };
    let say = Say::new(a.announce, a.quiet);
    let words = |m: &str| crate::flags::in_flags(m, &[]);
    crate::netem::dry_run(args::serve(&given, words, say, dry)?)
}

/// `transfer send`: the files, checked by the role; its report printed.
fn send(a: TransferSendArgs, dry: bool) -> Result<(), Failure> {
    let cfg = SendArgs {
        proto: a.proto,
        to: a.to,
        tcp_cc: a.tcp_cc,
        timeout: a.timeout,
        tls_trust: a.tls_trust,
        json: a.json,
        files: a.files,
    }
    .config()?;
    if dry {
        return crate::dryrun::print_checked(&args::send_dry_run_text(&cfg));
    }
    out(&roles::transfer::send(&cfg)?)
}

/// The measured experiment: the lab's groups (one per protocol) with the link's keys.
fn experiment(a: TransferArgs, dry: bool) -> Result<(), Failure> {
    let hosts = a.hosts.plan()?;
    let k = &a.keys;
    let mut groups = flags::transfer_groups(&k.given)?;
    for g in &mut groups {
        a.link.add_to(g);
    }
    let plan = k.plan_flags(order_seed(k.value("seed"))?).plan(&groups)?;
    let capture = a.link.workload_capture()?;
    if dry {
        return crate::dryrun::print_plan(&crate::dryrun::keeping_invalid(
            plan,
            a.format.keep_invalid,
        ));
    }
    let mut store = open_store(&a.db.db)?;
    let id = run_and_print(&plan, &mut store, &hosts, &a.format, capture.as_ref())?;
    match transfer::failed_repetitions(&store, id)? {
        None => Ok(()),
        Some(m) => Err(Failure::Run(m)),
    }
}
