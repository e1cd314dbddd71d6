//! controller (to be written).
