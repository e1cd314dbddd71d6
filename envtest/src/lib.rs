//! An in-process Kubernetes API server for testing controllers without a
//! cluster (to be written).
