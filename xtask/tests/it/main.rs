//! Integration tests of xtask: for now the layering of its own modules
//! (`module_graph`); the tasks themselves are tested in their modules and
//! by `cargo xtask test-scaffold`.

mod module_graph;
