//! The batch scorer: per-session features and the human-likeness model.
//!
//! Not built yet: the scoring-runs issue fills this crate. It will read events through
//! `query` (DataFusion) and compute with rayon, never on the async runtime's workers.
