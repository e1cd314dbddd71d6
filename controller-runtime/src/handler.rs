//! handler (to be written).
