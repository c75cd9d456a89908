//! The report directory: `index.html` (self-contained, inline SVG), `report.md` (its Markdown
//! twin) and `results.csv` (every repetition), all generated from the store alone.

use std::path::{Path, PathBuf};

use crate::store::Store;
use crate::{html, output, LabError};

/// The files of a written report.
#[derive(Debug, Clone)]
pub struct ReportFiles {
    /// The HTML report.
    pub html: PathBuf,
    /// The Markdown twin.
    pub markdown: PathBuf,
    /// Every repetition as CSV.
    pub csv: PathBuf,
}

/// Writes the report of experiments `ids` into directory `dir` (created if needed); the
/// repetitions marked invalid are in its statistics only when `keep_invalid`.
pub fn write_report(
    store: &Store,
    ids: &[i64],
    title: &str,
    dir: &Path,
    keep_invalid: bool,
) -> Result<ReportFiles, LabError> {
    if ids.is_empty() {
        return Err(LabError::Plan(format!(
            "'{}' holds no experiments to report: run one first",
            store.path().display()
        )));
    }
    let io = |what: &Path, e: std::io::Error| LabError::Io {
        context: format!(
            "cannot write '{}' (choose a writable directory with `out` DIR)",
            what.display()
        ),
        source: e,
    };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let files = ReportFiles {
        html: dir.join("index.html"),
        markdown: dir.join("report.md"),
        csv: dir.join("results.csv"),
    };
    std::fs::write(
        &files.html,
        html::html_report_with(store, ids, title, keep_invalid)?,
    )
    .map_err(|e| io(&files.html, e))?;
    std::fs::write(
        &files.markdown,
        output::markdown_report_with(store, ids, title, keep_invalid)?,
    )
    .map_err(|e| io(&files.markdown, e))?;
    std::fs::write(&files.csv, output::samples_csv(store, ids)?).map_err(|e| io(&files.csv, e))?;
    Ok(files)
}
