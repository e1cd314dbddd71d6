//! reflector (to be written).
