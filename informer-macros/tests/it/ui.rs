//! trybuild: every compile error the derive reports, with its message and
//! span (`tests/ui/fail_*.rs` + `.stderr`), and the attribute sets that must
//! compile (`tests/ui/pass_*.rs`). One batch, one build.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
}
