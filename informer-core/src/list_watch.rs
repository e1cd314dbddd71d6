//! list_watch (to be written).
