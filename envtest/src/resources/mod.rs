//! The resource layer: what each kind of object is and the rules it obeys,
//! independent of how it travels. The registry names every served resource
//! (built-in kinds and those CustomResourceDefinitions register); per kind it
//! knows how to validate an object (typed decoding, metadata, CRD schemas and
//! CEL), default it, prepare a create or update (CRDs, patches, server-side
//! apply and field ownership, size limits), select it (label and field
//! selectors) and show it as table rows.
//! It reads and writes objects only through the storage layer below.

pub mod crd;
pub mod defaults;
pub mod limits;
pub mod objects;
pub mod patch;
pub mod registry;
pub mod schema;
pub mod selectors;
pub mod ssa;
pub mod table;
pub mod validation;
