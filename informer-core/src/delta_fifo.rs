//! delta_fifo (to be written).
