//! shared_informer (to be written).
