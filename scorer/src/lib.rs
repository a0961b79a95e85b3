//! The batch scorer: per-session behavioural features, the human-likeness model, and scoring
//! runs that read a survey's events from the lake and publish features and scores.
//!
//! - [`trace`]: a session's events in compact form, and the browser environment it reported.
//! - [`features`]: pointer kinematics, key timing, text input, scrolling, focus and
//!   environment tells, computed per session.
//! - [`evidence`]: one session's timeline and features as a reviewer sees them.
//! - [`kinematics`]: movement-level pointer features that hold across sampling rates, event
//!   coalescing and screen scales (resampled velocity profiles, Fitts's law, pauses).
//! - [`model`]: the versioned, explainable model file and the bands.
//! - [`cohort`]: a run's sessions of one survey compared with each other: how many behave
//!   alike, against how many would among people, and what a cluster does to a score.
//! - [`scan`]: DataFusion over a survey's live `events` files, grouped into traces.
//! - [`synthetic`]: generated human-like and automation-like sessions for tests and benchmarks.
//! - [`tables`]: the rows a run publishes to the lake's `features` and `scores` tables.
//! - [`run`]: run execution (leases, resume, cancel, progress) and the background service.
//!
//! Features run on rayon's pool, never on the async runtime's workers. The scorer reads and
//! writes the lake through the `lake` and `query` crates and knows nothing of collection: a
//! server hands it a [`run::Flusher`] to commit what its log holds before a run plans.

pub mod cohort;
pub mod evidence;
pub mod features;
pub mod kinematics;
pub mod model;
pub mod run;
pub mod scan;
pub mod synthetic;
pub mod tables;
pub mod trace;

pub use features::Features;
pub use model::{Model, Score};
pub use run::{RunEnd, Scorer, ScoringService, ScoringSettings};
