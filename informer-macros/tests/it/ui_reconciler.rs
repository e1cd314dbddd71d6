//! `#[derive(Reconciler)]` at compile time: the full option set compiles,
//! and every mistake the derive reports fails with the `.stderr` checked in
//! next to it (`TRYBUILD=overwrite` regenerates them).

#[test]
fn reconciler_derive_errors_and_full_option_set() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/reconciler/pass_*.rs");
    t.compile_fail("tests/ui/reconciler/fail_*.rs");
}
