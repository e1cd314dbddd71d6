//! The attribute sets that must compile (and whose generated items hold what
//! they promise), built as part of this binary rather than by trybuild: a
//! trybuild `pass` case makes trybuild build every case and all their
//! dependencies with code generation, one case at a time, where compile-fail
//! cases alone need only `cargo check` in one batch.
//!
//! The derived types carry fields no test reads, and the derives' own
//! attributes repeat a key in each of several entries (`printcolumn(..,
//! type = "string")`), which clippy's attribute lint mistakes for a
//! duplicated attribute.
#![allow(dead_code, clippy::duplicated_attributes)]

mod api_types;
mod controller_fleet;
mod controller_full;
mod controller_sharding;
mod full;
mod minimal;
