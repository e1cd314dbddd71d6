//! predicate (to be written).
