//! The codec's integration tests, one binary.

mod module_graph;
