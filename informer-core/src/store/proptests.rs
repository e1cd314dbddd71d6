//! Property tests: random operation sequences against a model.
