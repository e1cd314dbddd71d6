//! workqueue (to be written).
