//! trybuild: every compile error the derives report, with its message and
//! span (`tests/ui/fail_*.rs` + `.stderr` for `CustomResource`,
//! `tests/ui/reconciler/fail_*.rs` for `Reconciler`). Compile-fail cases
//! only: trybuild then checks them in one batch with `cargo check`; the
//! attribute sets that must compile are in `compiles`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail_*.rs");
    t.compile_fail("tests/ui/reconciler/fail_*.rs");
}
