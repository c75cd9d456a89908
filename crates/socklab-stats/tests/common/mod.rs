//! Shared assertion helpers for the integration tests (included with `mod`).
#![allow(dead_code)] // each test crate uses a subset of the helpers

/// Asserts `|got - want| <= tol * |want|` (relative tolerance).
#[track_caller]
pub fn assert_rel(got: f64, want: f64, tol: f64) {
    let err = (got - want).abs();
    assert!(
        err <= tol * want.abs(),
        "got {got:e}, want {want:e}, rel err {:e} > {tol:e}",
        err / want.abs()
    );
}

/// Asserts `|got - want| <= tol`.
#[track_caller]
pub fn assert_abs(got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol,
        "got {got:e}, want {want:e}, abs err {:e} > {tol:e}",
        (got - want).abs()
    );
}
