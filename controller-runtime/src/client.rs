//! client (to be written).
