//! The examples' integration tests: each program runs its bounded demo on
//! the embedded API server, as a user would run it from a fresh clone, and
//! must exit successfully having printed its story. The demos check their
//! own end states (and fail with a message when one is not reached), so a
//! test here fails when the behaviour an example shows breaks.

mod programs;
