//! selector (to be written).
