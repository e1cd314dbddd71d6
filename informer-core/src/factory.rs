//! factory (to be written).
