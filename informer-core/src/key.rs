//! key (to be written).
