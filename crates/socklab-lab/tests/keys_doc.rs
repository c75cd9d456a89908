//! `docs/keys.md` is generated from the key descriptors: it must match them.

#[test]
fn docs_keys_md_matches_the_key_descriptors() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/keys.md");
    let want = socklab_lab::workload::keys_markdown();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/keys.md is out of date with the key descriptors: run UPDATE_DOCS=1 cargo test -p socklab-lab --test keys_doc"
    );
    for key in ["bufsize", "read_size", "link_seed", "tcp_cc", "design"] {
        assert!(have.contains(&format!("| `{key}` |")), "{key} missing");
    }
}
