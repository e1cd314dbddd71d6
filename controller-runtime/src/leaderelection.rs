//! leaderelection (to be written).
