//! trybuild: every compile error the derives report, with its message and
//! span (`tests/ui/fail_*.rs` + `.stderr` for `CustomResource`,
//! `tests/ui/reconciler/fail_*.rs` for `Reconciler`), and the attribute sets
//! that must compile (`pass_*.rs`). One batch, one build.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.pass("tests/ui/reconciler/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
    t.compile_fail("tests/ui/reconciler/fail_*.rs");
}
