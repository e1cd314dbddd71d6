//! reconcile (to be written).
