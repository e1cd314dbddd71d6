//! envtest-server
fn main() {}
