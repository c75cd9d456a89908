//! Workload parameter parsing never panics; a parsed workload prints to parameters that parse
//! back to the same workload. Input: lines of `key=value`, the first line names the workload.
//! (The `to` key is skipped: resolving arbitrary host names would do DNS look-ups.)
use socklab_lab::model::params::Params;
use socklab_lab::workload::Workload;

/// One input of the target.
pub fn run(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    let mut lines = s.lines();
    let kind = lines.next().unwrap_or("bulk");
    let mut p = Params::new();
    for l in lines {
        if let Some((k, v)) = l.split_once('=') {
            if socklab_lab::model::params::normalize_key(k) != "to" {
                p.set(k, v);
            }
        }
    }
    if let Ok(w) = Workload::from_params(kind, &p) {
        assert_eq!(Workload::from_params(kind, &w.params()).unwrap(), w);
    }
}
