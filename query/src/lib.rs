//! query
