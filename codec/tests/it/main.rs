//! The codec's integration tests, one binary.

mod golden;
mod module_graph;
