//! manager (to be written).
