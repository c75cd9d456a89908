//! The `netem` driver: a veth pair between the namespaces and the kernel's own `tc netem` on
//! each end's egress, for kernels that have `sch_netem` (most distributions' do; the machine
//! socklab was first built on does not, so [`kernel_has_netem`] probes in a throwaway
//! namespace first and `--driver auto` falls back to `tun`).

use std::sync::OnceLock;

use super::ns::{ip, remove_namespace, run_tool, Namespaces, Side, PREFIX};
use super::{DirReport, LinkPair, LinkReport};
use crate::LinkError;

/// The veth end's name in both namespaces.
pub const VETH_NAME: &str = "sl-veth";

static HAS_NETEM: OnceLock<bool> = OnceLock::new();

/// Whether `tc qdisc add … netem` works here: probed once per process in a throwaway
/// namespace `sl-<pid>-<n>-p` on a veth pair, removed again. False without root.
pub fn kernel_has_netem() -> bool {
    *HAS_NETEM.get_or_init(|| {
        if !socklab_sys::netns::is_root() {
            return false;
        }
        let name = format!("sl-{}-p", super::ns::fresh_tag());
        let ok = ip(&["netns", "add", &name]).is_ok()
            && ip(&[
                "-n", &name, "link", "add", "sl-p0", "type", "veth", "peer", "name", "sl-p1",
            ])
            .is_ok()
            && run_tool(
                "tc",
                &[
                    "-n", &name, "qdisc", "add", "dev", "sl-p0", "root", "netem", "delay", "1ms",
                ],
            )
            .is_ok();
        let _ = remove_namespace(&name);
        ok
    })
}

/// Whether netem can express the pair: socklab's extensions `fifo`, `fixcsum`, `aqm`, `trace`
/// and rate schedules have no netem equivalent (netem's own `slot` and `ecn` pass through).
pub fn expressible(pair: &LinkPair) -> Result<(), LinkError> {
    for s in [&pair.forward, &pair.backward] {
        if s.keep_order
            || s.fix_checksum
            || s.aqm != socklab_impair::Aqm::Fifo
            || s.trace.is_some()
            || s.rate_schedule.is_some()
        {
            return Err(LinkError::Invalid(format!(
                "\"{s}\" uses socklab's own keywords (fifo, fixcsum, aqm, trace, rate schedules) that tc netem lacks: use `link_driver` tun"
            )));
        }
    }
    Ok(())
}

/// The `tc` arguments that put `spec` on `dev` in namespace `ns` (`verb`: add or change).
pub fn tc_args(ns: &str, verb: &str, spec: &socklab_impair::LinkSpec) -> Vec<String> {
    let mut v: Vec<String> = ["-n", ns, "qdisc", verb, "dev", VETH_NAME, "root", "netem"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let text = spec.to_string();
    v.extend(text.split_whitespace().map(str::to_string));
    // netem's default limit is socklab's default too, but say it so `change` resets it.
    if !text.contains("limit") {
        v.push("limit".into());
        v.push(spec.limit.to_string());
    }
    v
}

/// A running netem link.
#[derive(Debug)]
pub struct NetemLink;

impl NetemLink {
    /// Creates the veth pair (client `10.77.0.1`, server `10.77.0.2`) and the qdiscs.
    pub fn start(ns: &Namespaces, pair: &LinkPair, mtu: u32) -> Result<NetemLink, LinkError> {
        let c = ns.name(Side::Client);
        let s = ns.name(Side::Server);
        ip(&[
            "-n", &c, "link", "add", VETH_NAME, "type", "veth", "peer", "name", VETH_NAME, "netns",
            &s,
        ])?;
        for side in [Side::Client, Side::Server] {
            let n = ns.name(side);
            let mtu_s = mtu.to_string();
            ip(&["-n", &n, "link", "set", VETH_NAME, "mtu", &mtu_s, "up"])?;
            let addr = format!("{}/{PREFIX}", side.addr());
            ip(&["-n", &n, "addr", "add", &addr, "dev", VETH_NAME])?;
        }
        let me = NetemLink;
        me.apply(ns, pair, "add")?;
        Ok(me)
    }

    fn apply(&self, ns: &Namespaces, pair: &LinkPair, verb: &str) -> Result<(), LinkError> {
        for (side, spec) in [
            (Side::Client, &pair.forward),
            (Side::Server, &pair.backward),
        ] {
            let args = tc_args(&ns.name(side), verb, spec);
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            run_tool("tc", &refs)?;
        }
        Ok(())
    }

    /// Changes both qdiscs.
    pub fn set(&mut self, ns: &Namespaces, pair: &LinkPair) -> Result<(), LinkError> {
        self.apply(ns, pair, "change")
    }

    /// netem's own counters (`tc -s qdisc`): packets sent and dropped per direction; netem
    /// does not count its duplicates, corruptions or reorders separately.
    pub fn report(&self, ns: &Namespaces) -> LinkReport {
        let dir = |side: Side| {
            let name = ns.name(side);
            let mut d = DirReport::default();
            if let Ok(out) = run_tool(
                "tc",
                &["-j", "-s", "-n", &name, "qdisc", "show", "dev", VETH_NAME],
            ) {
                if let Some((sent, drops)) = qdisc_counts(&out) {
                    d.stats.delivered = sent;
                    d.stats.packets_in = sent + drops;
                    d.stats.dropped = drops;
                }
            }
            d
        };
        LinkReport {
            forward: dir(Side::Client),
            backward: dir(Side::Server),
            rule: super::ValidRule::default(),
        }
    }
}

/// `(packets, drops)` of the netem qdisc in `tc -j -s qdisc show` output.
pub fn qdisc_counts(json: &str) -> Option<(u64, u64)> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let q = v
        .as_array()?
        .iter()
        .find(|q| q.get("kind").and_then(|k| k.as_str()) == Some("netem"))?;
    Some((q.get("packets")?.as_u64()?, q.get("drops")?.as_u64()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_arguments_are_netems_own_syntax() {
        let spec = "delay 100ms 10ms distribution normal loss 5% rate 100mbit"
            .parse()
            .unwrap();
        let a = tc_args("sl-1-0-c", "add", &spec).join(" ");
        assert_eq!(
            a,
            "-n sl-1-0-c qdisc add dev sl-veth root netem delay 100ms 10ms distribution normal loss 5% rate 100mbit limit 1000"
        );
        let a = tc_args("x", "change", &"limit 50".parse().unwrap()).join(" ");
        assert!(a.ends_with("netem limit 50"), "{a}");
    }

    #[test]
    fn socklab_extensions_are_refused_for_netem() {
        let p = LinkPair::parse("delay 10ms 5ms fifo", None).unwrap();
        assert!(expressible(&p)
            .unwrap_err()
            .to_string()
            .contains("`link_driver` tun"));
        let p = LinkPair::parse("corrupt 1%", Some("corrupt 1% fixcsum")).unwrap();
        assert!(expressible(&p).is_err());
        expressible(&LinkPair::parse("loss 1%", None).unwrap()).unwrap();
        for ext in [
            "rate 20mbit aqm fq_codel",
            "rate 10mbit@0s 1mbit@1s",
            "rate 1mbit aqm codel ecn",
        ] {
            let e = expressible(&LinkPair::parse(ext, None).unwrap()).unwrap_err();
            assert!(e.to_string().contains("`link_driver` tun"), "{ext}: {e}");
        }
        // netem's own slot and ecn go to tc as written.
        let p = LinkPair::parse("loss 5% ecn slot 10ms 20ms packets 8", None).unwrap();
        expressible(&p).unwrap();
        assert_eq!(
            tc_args("x", "add", &p.forward).join(" "),
            "-n x qdisc add dev sl-veth root netem loss 5% slot 10ms 20ms packets 8 ecn limit 1000"
        );
    }

    #[test]
    fn qdisc_counts_read_tc_json() {
        let j = r#"[{"kind":"netem","handle":"8001:","bytes":1000,"packets":10,"drops":2}]"#;
        assert_eq!(qdisc_counts(j), Some((10, 2)));
        assert_eq!(
            qdisc_counts(r#"[{"kind":"tbf","packets":1,"drops":0}]"#),
            None
        );
    }
}
