//! healthz (to be written).
