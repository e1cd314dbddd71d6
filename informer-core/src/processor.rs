//! processor (to be written).
