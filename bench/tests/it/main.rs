//! informer-bench's own checks: the layering of its modules
//! (`module_graph`).

mod module_graph;
