//! Bulk's TLS keys (issue 30 part 1): `tls` (off, on, ktls; `--tls` is the axis off,on, so each
//! TLS cell runs beside its plain twin and the report gives the ratio), `tls_version` and
//! `tls_trust`. A TLS cell stores the version and cipher suite its streams agreed on, the
//! handshake time, and both ends' CPU seconds per GB moved (its plain twin stores those too).
//!
//! The certificate: a sink socklab started prints its SHA-256 after its port, and the client
//! pins it (`tls_trust` auto); against another sink, auto trusts any certificate whose
//! handshake signature checks (as wrk does), or give its fingerprint or a CA file.

use serde_json::json;
use socklab_net::bulk::{BulkResult, BulkTls};
use socklab_tls::{Fingerprint, TlsVersion, Trust};

use crate::model::metric::{m, Better, Metric};
use crate::model::params::{Key, Params, Preset};
use crate::model::sample::Sample;
use crate::resources::{Resources, ServerKey, ServerRole};
use crate::LabError;

/// `tls`.
pub const TLS: Key = Key::new(
    "tls",
    "(off: plain TCP, no CPU per GB)",
    "TLS on every stream: off, on (rustls in user space, TLS 1.3 unless tls_version, the sink's certificate of the run), ktls (the kernel's TLS, where the kernel has the tls module); a list is an axis",
)
.no_flag()
.presets(PRESETS)
.list();

const PRESETS: &[Preset] = &[
    Preset::new(
        "tls",
        "off,on",
        "TLS on every stream beside the same cell in plain TCP (the tls axis off,on): throughput, both ends' CPU per GB, the handshake time, the cipher suite (write strategies write, single, writev, sendmsg)",
    ),
    Preset::new(
        "ktls",
        "off,on,ktls",
        "The tls axis off,on plus ktls, the kernel's TLS; where the kernel has no tls module, a one-line error says so",
    ),
];

/// `tls_version`.
pub const TLS_VERSION: Key = Key::new(
    "tls_version",
    "1.3",
    "with tls: the TLS version offered, 1.3 or 1.2",
)
.list();

/// `tls_trust`.
pub const TLS_TRUST: Key = Key::new(
    "tls_trust",
    "auto",
    "with tls: the sink's certificate: auto (pinned to the one a sink socklab started names; any other sink's unverified, as wrk), unverified, a SHA-256 fingerprint (as socklab sink prints it) or a PEM file of CA certificates",
);

/// `tls_handshake_ms`.
pub const HANDSHAKE_MS: Metric = m(
    "tls_handshake_ms",
    "ms",
    "handshake ms",
    "with tls: the streams' TLS handshakes, mean (client side, after READY, outside the stream's time and CPU)",
    Better::Lower,
);

/// `snd_cpu_ns_per_byte`.
pub const SND_CPU_PER_BYTE: Metric = m(
    "snd_cpu_ns_per_byte",
    "ns/B",
    "snd ns/B",
    "with tls (on and its plain twin): the sending ends' CPU per byte moved, ns (= CPU seconds per GB)",
    Better::Lower,
);

/// `rcv_cpu_ns_per_byte`.
pub const RCV_CPU_PER_BYTE: Metric = m(
    "rcv_cpu_ns_per_byte",
    "ns/B",
    "rcv ns/B",
    "with tls (on and its plain twin): the receiving ends' CPU per byte moved, ns (= CPU seconds per GB)",
    Better::Lower,
);

/// A value of `tls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Plain TCP (the twin of a TLS cell).
    Off,
    /// rustls in user space.
    On,
    /// The kernel's TLS.
    Ktls,
}

impl Choice {
    fn as_str(self) -> &'static str {
        match self {
            Choice::Off => "off",
            Choice::On => "on",
            Choice::Ktls => "ktls",
        }
    }
}

fn parse_choice(s: &str) -> Result<Choice, String> {
    match s.trim() {
        "off" | "false" => Ok(Choice::Off),
        "on" | "true" => Ok(Choice::On),
        "ktls" => Ok(Choice::Ktls),
        other => Err(format!("'{other}': use off, on or ktls")),
    }
}

/// The TLS keys of a bulk cell, as given (`None` in [`super::BulkSpec`]: `tls` not given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsKeys {
    /// `tls`.
    pub choice: Choice,
    /// `tls_trust` as given (`auto`: pin a sink socklab started).
    pub trust: String,
}

/// Parses the TLS keys: the keys, and the net layer's TLS (`None` for off). `iperf3` targets
/// and kTLS are refused in one line.
pub fn parse(p: &Params, iperf3: bool) -> Result<(Option<TlsKeys>, Option<BulkTls>), LabError> {
    let plan = |m: String| LabError::Plan(m);
    let Some(choice) = p.parse_opt("tls", parse_choice)? else {
        for k in ["tls_version", "tls_trust"] {
            if p.get(k).is_some() {
                return Err(plan(format!(
                    "`{k}` applies with `tls` only: give `tls` too, or leave `{k}` out"
                )));
            }
        }
        return Ok((None, None));
    };
    let trust_text = p.value(&TLS_TRUST, |s| match s.trim() {
        "auto" => Ok("auto".to_string()),
        t => Trust::parse(t).map(|_| t.to_string()),
    })?;
    let keys = TlsKeys {
        choice,
        trust: trust_text.clone(),
    };
    if choice == Choice::Off {
        return Ok((Some(keys), None));
    }
    if iperf3 {
        return Err(plan(
            "`tls` needs a sink of socklab: iperf3 has no TLS; leave tls out for iperf3:// targets"
                .into(),
        ));
    }
    if choice == Choice::Ktls {
        socklab_tls::ktls::probe().map_err(|e| plan(e.to_string()))?;
        return Err(plan(
            "`tls` ktls: this kernel has the tls module, but socklab does not build the kTLS data path yet (it could not be tested on the machines it was written on); use tls = on".into(),
        ));
    }
    let version = p.value(&TLS_VERSION, TlsVersion::parse)?;
    let trust = match trust_text.as_str() {
        "auto" => Trust::Unverified,
        t => Trust::parse(t).map_err(plan)?,
    };
    Ok((Some(keys), Some(BulkTls { version, trust })))
}

/// Prints the TLS keys when given (a plan stored before them keeps its text).
pub fn print(p: &mut Params, keys: &Option<TlsKeys>, tls: &Option<BulkTls>) {
    let Some(k) = keys else { return };
    p.set("tls", k.choice.as_str());
    if let Some(t) = tls {
        if t.version != TlsVersion::Tls13 {
            p.set("tls_version", t.version.to_string());
        }
        if k.trust != "auto" {
            p.set("tls_trust", k.trust.clone());
        }
    }
}

/// The keys a lone TLS key needs to be checked on its own: `tls` itself.
pub fn context(key: &str) -> Params {
    match key {
        "tls_version" | "tls_trust" => Params::new().with("tls", "on"),
        _ => Params::new(),
    }
}

/// The plain twin of a TLS cell: the same configuration with `tls = off` (and without the TLS
/// keys that only apply with TLS).
pub fn twin(config: &Params) -> Option<Params> {
    if !matches!(config.get("tls"), Some("on" | "ktls")) {
        return None;
    }
    let mut plain = config.clone();
    plain.remove("tls_version");
    plain.remove("tls_trust");
    plain.set("tls", "off");
    Some(plain)
}

/// Whether a cell is the plain twin the TLS cells are compared with (`tls = off`).
pub fn is_baseline(config: &Params) -> bool {
    config.get("tls") == Some("off")
}

/// The pin of a TLS cell against the sink socklab started (`tls_trust` auto): the certificate
/// its sink named after its port. `None` when there is nothing to pin.
pub fn pin(
    keys: &Option<TlsKeys>,
    tls: &Option<BulkTls>,
    self_sink: bool,
    res: &Resources,
    in_link: bool,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Fingerprint>, LabError> {
    let auto = keys.as_ref().is_some_and(|k| k.trust == "auto");
    if tls.is_none() || !auto || !self_sink {
        return Ok(None);
    }
    use crate::child::{named_certificate, CERTIFICATE_WAIT};
    let key = socklab_net::sink::TLS_FINGERPRINT_KEY;
    let sink = ServerKey {
        role: ServerRole::Sink,
        in_link,
    };
    let line = res.server_fact(&sink, CERTIFICATE_WAIT, &|v| v.get(key).is_some(), stop);
    named_certificate(line, key, "the sink socklab started").map(Some)
}

/// The TLS figures of a run: the handshake, the agreed version and suite (facts), and both
/// ends' CPU per GB; the plain twin (`tls = off`) gets the CPU per GB too.
pub fn add(s: &mut Sample, r: &BulkResult, keys: &Option<TlsKeys>) {
    if keys.is_none() {
        return;
    }
    let gb = r.bytes as f64 / 1e9;
    if gb > 0.0 {
        s.extend([
            ("snd_cpu_ns_per_byte", r.sender_cpu.cpu().as_secs_f64() / gb),
            (
                "rcv_cpu_ns_per_byte",
                r.receiver_cpu.cpu().as_secs_f64() / gb,
            ),
        ]);
    }
    let Some(t) = &r.tls else { return };
    if !t.handshake_s.is_empty() {
        let mean = t.handshake_s.iter().sum::<f64>() / t.handshake_s.len() as f64;
        s.extend([("tls_handshake_ms", mean * 1e3)]);
    }
    if let Some(extra) = s.extra.as_object_mut() {
        extra.insert(
            "tls".into(),
            json!({
                "version": t.version,
                "cipher": t.cipher,
                "handshake_ms": t.handshake_s.iter().map(|x| x * 1e3).collect::<Vec<_>>(),
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::bulk::BulkSpec;
    use crate::workload::Spec;

    fn spec(p: Params) -> Result<BulkSpec, String> {
        BulkSpec::parse(&p).map_err(|e| e.to_string())
    }

    #[test]
    fn tls_keys_parse_print_back_and_make_the_plain_twin_the_baseline() {
        let on = spec(Params::new().with("tls", "on")).unwrap();
        let t = on.cfg.tls.clone().unwrap();
        assert_eq!((t.version, t.trust), (TlsVersion::Tls13, Trust::Unverified));
        assert!(!on.cfg.is_classic());
        let p = on.params();
        assert_eq!((p.get("tls"), p.get("tls_version")), (Some("on"), None));
        assert_eq!(spec(p.clone()).unwrap(), on);
        assert!(!BulkSpec::is_baseline(&p));

        let off = spec(Params::new().with("tls", "off")).unwrap();
        assert_eq!(off.cfg.tls, None);
        assert!(BulkSpec::is_baseline(&off.params()));
        // Without the key nothing changes: the plan text of a stored experiment stays.
        let plain = spec(Params::new()).unwrap();
        assert_eq!((plain.tls.clone(), plain.params().get("tls")), (None, None));
        assert!(!BulkSpec::is_baseline(&plain.params()));

        let v12 = spec(Params::new().with("tls", "on").with("tls_version", "1.2")).unwrap();
        assert_eq!(v12.cfg.tls.as_ref().unwrap().version, TlsVersion::Tls12);
        assert_eq!(v12.params().get("tls_version"), Some("1.2"));
        let fp = "ab".repeat(32);
        let pinned = spec(Params::new().with("tls", "on").with("tls_trust", &fp)).unwrap();
        assert!(matches!(
            pinned.cfg.tls.as_ref().unwrap().trust,
            Trust::Pinned(_)
        ));
        assert_eq!(pinned.params().get("tls_trust"), Some(fp.as_str()));
        // With opts, the baseline is the options' baseline in plain TCP.
        let both = Params::new().with("opts", "baseline").with("tls", "off");
        assert!(BulkSpec::is_baseline(&both));
        assert!(!BulkSpec::is_baseline(&both.clone().with("tls", "on")));
    }

    #[test]
    fn tls_refusals_name_the_value_and_the_fix() {
        let e = |p: Params| spec(p).unwrap_err();
        assert!(e(Params::new().with("tls", "maybe")).contains("use off, on or ktls"));
        let m = e(Params::new().with("tls_version", "1.2"));
        assert!(m.contains("`tls_version` applies with `tls` only"), "{m}");
        let m = e(Params::new().with("tls", "on").with("strategy", "sendfile"));
        assert!(m.contains("`strategy` sendfile cannot carry `tls`"), "{m}");
        let m = e(Params::new()
            .with("tls", "on")
            .with("to", "iperf3://127.0.0.1"));
        assert!(m.contains("iperf3 has no TLS"), "{m}");
        let m = e(Params::new().with("tls", "on").with("tls_version", "1.1"));
        assert!(m.contains("1.1"), "{m}");
        // kTLS: the kernel's missing module, or (where it has it) the data path not built.
        let m = e(Params::new().with("tls", "ktls"));
        assert!(m.contains("tls"), "{m}");
        // off with a pin is no error (the twin of a pinned TLS cell).
        assert!(spec(
            Params::new()
                .with("tls", "off")
                .with("tls_trust", "unverified")
        )
        .is_ok());
    }

    #[test]
    fn a_tls_run_stores_its_handshake_cipher_and_cpu_per_gb() {
        use socklab_net::bulk::TlsStats;
        use socklab_sys::usage::Usage;
        use std::time::Duration;
        let r = BulkResult {
            bytes: 2_000_000_000,
            sender_cpu: Usage {
                user: Duration::from_millis(300),
                sys: Duration::from_millis(100),
                ..Usage::default()
            },
            receiver_cpu: Usage {
                user: Duration::from_millis(500),
                sys: Duration::from_millis(100),
                ..Usage::default()
            },
            tls: Some(TlsStats {
                version: "1.3".into(),
                cipher: "TLS13_AES_256_GCM_SHA384".into(),
                handshake_s: vec![0.001, 0.003],
            }),
            ..BulkResult::default()
        };
        let keys = Some(TlsKeys {
            choice: Choice::On,
            trust: "auto".into(),
        });
        let mut s = Sample::new([("gbps", 1.0)], json!({}));
        add(&mut s, &r, &keys);
        let get = |n: &str| s.metrics.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
        assert!((get("tls_handshake_ms").unwrap() - 2.0).abs() < 1e-9);
        assert!((get("snd_cpu_ns_per_byte").unwrap() - 0.2).abs() < 1e-9);
        assert!((get("rcv_cpu_ns_per_byte").unwrap() - 0.3).abs() < 1e-9);
        assert_eq!(s.extra["tls"]["cipher"], "TLS13_AES_256_GCM_SHA384");
        // Without the key, nothing is added.
        let mut plain = Sample::new([("gbps", 1.0)], json!({}));
        add(&mut plain, &r, &None);
        assert_eq!(plain.metrics.len(), 1);
    }
}
