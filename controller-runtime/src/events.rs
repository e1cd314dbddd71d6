//! events (to be written).
