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
    "off",
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
        "As --tls, plus the kernel's TLS (kTLS); where the kernel has no tls module, a one-line error says so",
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

/// `snd_cpu_s_per_gb`.
pub const SND_CPU_PER_GB: Metric = m(
    "snd_cpu_s_per_gb",
    "s/GB",
    "snd cpu/GB",
    "with tls (on and its plain twin): the sending ends' CPU seconds per GB (10^9 bytes) moved",
    Better::Lower,
);

/// `rcv_cpu_s_per_gb`.
pub const RCV_CPU_PER_GB: Metric = m(
    "rcv_cpu_s_per_gb",
    "s/GB",
    "rcv cpu/GB",
    "with tls (on and its plain twin): the receiving ends' CPU seconds per GB moved",
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
    let key = socklab_net::sink::TLS_FINGERPRINT_KEY;
    let v = res
        .server_fact(
            &ServerKey {
                role: ServerRole::Sink,
                in_link,
            },
            std::time::Duration::from_secs(10),
            &|v| v.get(key).is_some(),
            stop,
        )
        .ok_or_else(|| {
            LabError::Child(
                "the sink socklab started did not name its TLS certificate within 10 s".into(),
            )
        })?;
    Fingerprint::parse(v[key].as_str().unwrap_or_default())
        .map(Some)
        .map_err(|e| LabError::Child(format!("the sink's TLS certificate: {e}")))
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
            ("snd_cpu_s_per_gb", r.sender_cpu.cpu().as_secs_f64() / gb),
            ("rcv_cpu_s_per_gb", r.receiver_cpu.cpu().as_secs_f64() / gb),
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
