//! lister (to be written).
