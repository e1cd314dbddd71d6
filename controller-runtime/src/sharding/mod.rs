//! Sharding: spread one controller's objects over N replicas, each object
//! reconciled by exactly one replica at a time.
//!
//! (Design and layers: see the sections below, filled in as the pieces
//! land.) [`ring`] decides owners from a member set.

pub mod ring;
