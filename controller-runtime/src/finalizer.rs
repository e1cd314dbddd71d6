//! finalizer (to be written).
