//! store (to be written).
