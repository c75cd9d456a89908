//! Experiment files are data, not code. Two settings of a file's `[hosts]` would make ssh run
//! programs the user did not choose, and take effect only when the command line trusts them
//! (`trust_ssh_config`), or are replaced by the command line's own:
//!
//! - `ssh_config`: `ssh -F FILE`; a `ProxyCommand`, `LocalCommand`, `KnownHostsCommand` or
//!   `Match exec` there runs on this machine as the user, and `IdentityFile`,
//!   `UserKnownHostsFile`, `StrictHostKeyChecking` there choose keys and host checking;
//! - `remote_socklab`: the program ssh runs on every host, as the user.
//!
//! The rest of `[hosts]` is data: host names are SSH destinations (checked so that ssh cannot
//! read one as an option) looked up in the user's own ssh configuration, and `server_addr` is
//! an address. Without a `ssh_config` of anyone's, ssh reads the user's `~/.ssh/config` (and
//! `/etc/ssh/ssh_config`), as it does when the user runs ssh: that file is the user's, and
//! whoever can write it can write the user's shell start-up files too.

use super::ssh::{channel_args, master_args, option_args, socklab_line, SshOptions};
use super::transport::shell_quote;
use super::HostPlan;

/// The settings of an experiment file's `[hosts]` (`file`) that are code and would take
/// effect under the command line's (`cli`): those the command line does not replace. Each is
/// (field, value, what it makes ssh do).
pub fn code_settings(
    file: &SshOptions,
    cli: &SshOptions,
) -> Vec<(&'static str, String, &'static str)> {
    let mut v = Vec::new();
    if let (Some(f), None) = (&file.config, &cli.config) {
        v.push((
            "ssh_config",
            f.display().to_string(),
            "makes ssh read options this file chose (a ProxyCommand or LocalCommand there runs as you)",
        ));
    }
    if let (Some(r), None) = (&file.remote_socklab, &cli.remote_socklab) {
        v.push((
            "remote_socklab",
            r.clone(),
            "names the program ssh runs on the hosts",
        ));
    }
    v
}

/// The one line a run of experiment file `origin` refuses with when its `[hosts]` ssh settings
/// (`file`) would take effect and the command line did not trust them (`trusted`); `None`
/// when they are trusted, replaced by the command line's (`cli`), or absent.
pub fn refusal(origin: &str, file: &SshOptions, cli: &SshOptions, trusted: bool) -> Option<String> {
    let code = code_settings(file, cli);
    if trusted || code.is_empty() {
        return None;
    }
    let said: Vec<String> = code
        .iter()
        .map(|(field, value, what)| format!("{field} = '{}' {what}", value.escape_debug()))
        .collect();
    let own: Vec<String> = code.iter().map(|(f, _, _)| format!("`{f}`")).collect();
    Some(format!(
        "{origin}: [hosts] {}: use {} only with `trust_ssh_config`, or give your own {} (`dry_run` shows the ssh commands)",
        said.join(", and "),
        if code.len() == 1 { "it" } else { "them" },
        own.join(" and ")
    ))
}

/// What a dry run says of `plan`'s hosts: the ssh commands socklab would run and the
/// configuration files they read; empty when every role runs here.
pub fn dry_text(plan: &HostPlan) -> String {
    let mut names: Vec<&str> = Vec::new();
    let generators = plan.generators.iter().map(String::as_str);
    for n in plan
        .remote_server()
        .into_iter()
        .chain(plan.remote_client())
        .chain(generators)
    {
        if n != super::LOCAL && !names.contains(&n) {
            names.push(n);
        }
    }
    if names.is_empty() {
        return String::new();
    }
    let opts = &plan.ssh;
    let mut s = match &opts.config {
        Some(f) => format!(
            "  ssh reads {} only (ssh -F: not ~/.ssh/config nor /etc/ssh/ssh_config)\n",
            shell_quote(&f.display().to_string())
        ),
        None => "  ssh reads ~/.ssh/config and /etc/ssh/ssh_config (OpenSSH's own)\n".to_string(),
    };
    let mut base = vec!["ssh".to_string()];
    if let Some(f) = &opts.config {
        base.extend(["-F".to_string(), f.display().to_string()]);
    }
    base.extend(option_args());
    let line = |words: &[String]| {
        words
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let control = std::env::temp_dir().join("socklab-ssh-PID-RANDOM/m");
    let control = control.display().to_string();
    let remote = format!("{} ROLE …", socklab_line(opts, &[]));
    for n in names {
        let host = n.to_string();
        let mut channel = base.clone();
        if !opts.no_multiplex {
            let mut master = base.clone();
            master.extend(master_args(&control));
            master.push(host.clone());
            s += &format!("  ssh to {n}, once: {}\n", line(&master));
            channel.extend(channel_args(&control));
        }
        channel.extend(["-T".to_string(), host, "--".into()]);
        s += &format!(
            "  each role and check on {n}: {} {}\n",
            line(&channel),
            shell_quote(&remote)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn opts(config: Option<&str>, remote: Option<&str>) -> SshOptions {
        SshOptions {
            config: config.map(PathBuf::from),
            remote_socklab: remote.map(String::from),
            no_multiplex: false,
        }
    }

    /// Issue 26 item 5: an experiment file's ssh_config and remote_socklab are code; the run
    /// refuses them untrusted, in one line naming the field and the flag.
    #[test]
    fn a_files_ssh_settings_are_refused_unless_trusted() {
        let none = SshOptions::default();
        let file = opts(Some("evil_config"), None);
        let e = refusal("exp.toml", &file, &none, false).expect("refused");
        assert_eq!(
            e,
            "exp.toml: [hosts] ssh_config = 'evil_config' makes ssh read options this file chose (a ProxyCommand or LocalCommand there runs as you): use it only with `trust_ssh_config`, or give your own `ssh_config` (`dry_run` shows the ssh commands)"
        );
        assert!(!e.contains('\n'));
        assert_eq!(refusal("exp.toml", &file, &none, true), None);
        // The command line's own file replaces the file's: nothing of the file's is used.
        assert_eq!(
            refusal("exp.toml", &file, &opts(Some("mine"), None), false),
            None
        );
        let remote = opts(None, Some("/tmp/x"));
        let e = refusal("exp.toml", &remote, &none, false).expect("refused");
        assert!(
            e.starts_with("exp.toml: [hosts] remote_socklab = '/tmp/x' names the program ssh runs on the hosts: use it only with `trust_ssh_config`, or give your own `remote_socklab`"),
            "{e}"
        );
        assert_eq!(
            refusal("exp.toml", &remote, &opts(None, Some("/opt/s")), false),
            None
        );
        let both = opts(Some("c\u{1b}[2J"), Some("/tmp/x"));
        let e = refusal("exp.toml", &both, &none, false).expect("refused");
        assert!(e.contains("ssh_config = 'c\\u{1b}[2J'"), "{e}");
        assert!(
            e.contains(", and remote_socklab = '/tmp/x' names the program ssh runs on the hosts: use them only with `trust_ssh_config`, or give your own `ssh_config` and `remote_socklab`"),
            "{e}"
        );
        // Host names and addresses are data; a file without ssh settings needs no trust.
        assert_eq!(refusal("exp.toml", &none, &none, false), None);
        assert_eq!(refusal("exp.toml", &none, &file, false), None);
    }

    #[test]
    fn the_dry_run_shows_the_ssh_commands_and_the_file_they_read() {
        let mut plan = HostPlan {
            server: Some("lab2".into()),
            generators: vec!["lab2".into(), "local".into(), "lab3".into()],
            ssh: opts(Some("my config"), Some("/opt/socklab")),
            ..HostPlan::default()
        };
        let t = dry_text(&plan);
        assert!(
            t.starts_with("  ssh reads 'my config' only (ssh -F: not ~/.ssh/config nor /etc/ssh/ssh_config)\n"),
            "{t}"
        );
        assert!(
            t.contains(
                "  ssh to lab2, once: ssh -F 'my config' -o BatchMode=yes -o ConnectTimeout=10 "
            ),
            "{t}"
        );
        assert!(
            t.contains("-o ControlMaster=yes -o ControlPersist=no -N lab2\n"),
            "{t}"
        );
        assert!(
            t.contains("-o ControlMaster=no -T lab2 -- 'exec /opt/socklab ROLE …'\n"),
            "{t}"
        );
        assert!(t.contains("  ssh to lab3, once:"), "{t}");
        assert_eq!(t.matches("ssh to lab2").count(), 1, "{t}");
        assert!(!t.contains("ssh to local"), "{t}");
        plan.ssh = SshOptions::default();
        plan.ssh.no_multiplex = true;
        let t = dry_text(&plan);
        assert!(
            t.starts_with("  ssh reads ~/.ssh/config and /etc/ssh/ssh_config (OpenSSH's own)\n"),
            "{t}"
        );
        assert!(!t.contains("ControlPath") && !t.contains(" -F "), "{t}");
        assert!(
            t.contains(" -T lab2 -- 'PATH=\"$HOME/.local/bin:$PATH\" exec socklab ROLE …'"),
            "{t}"
        );
        assert_eq!(dry_text(&HostPlan::default()), "");
    }
}
