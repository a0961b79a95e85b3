//! What the two catalog backends share: every method whose SQL is the same in both dialects is
//! written once here, in one macro per role trait, which each backend invokes with the methods
//! it writes its own way (upserts, row locks, advisory locks, batch inserts and the other
//! places where SQLite and PostgreSQL differ):
//!
//! | role trait | macro | file |
//! |---|---|---|
//! | [`Organizations`](crate::Organizations) | `impl_organizations!` | `orgs.rs` |
//! | [`Surveys`](crate::Surveys) | `impl_surveys!` | `surveys.rs` |
//! | [`Runs`](crate::Runs) | `impl_runs!` | `runs.rs` |
//! | [`Deletions`](crate::Deletions) | `impl_deletions!` | `deletions.rs` |
//! | [`Fleet`](crate::Fleet) | `impl_fleet!` | `fleet.rs` |
//! | [`Desk`](crate::Desk) | `impl_desk!` | `desk.rs` |
//!
//! The shared SQL uses PostgreSQL's numbered placeholders (`$1`, `$2`, ...), which sqlx's SQLite
//! driver binds by number too, and forms both dialects read the same way (`ON CONFLICT ... DO
//! NOTHING`, `RETURNING`, row values).
//!
//! Where the dialects differ inside a shared method, it asks the backend through `Self::`: each
//! backend's inherent impl defines
//!
//! - `SKIP_LOCKED`: the clause that makes a claim skip rows another instance is claiming
//!   (PostgreSQL's `FOR UPDATE SKIP LOCKED`; nothing in SQLite, which has one writer at a time);
//! - `IN_LIST_3` and `bound_list`: `identifier IN` a list bound as parameter 3;
//! - `lock_tombstone_ids` and `insert_tombstoned_identifiers`: tombstone inserts whose ids become
//!   visible in the order they were drawn.
//!
//! A macro rather than generic functions: sqlx's queries over a generic database need a
//! where-clause per bound type, longer than the SQL they would share. rustfmt does not format
//! inside a macro invocation's braces: the backends' own methods, passed in, keep the formatting
//! they are written with.

mod deletions;
pub(crate) mod desk;
mod fleet;
mod orgs;
mod runs;
mod surveys;

pub(crate) use deletions::{erase_session_rows_in, impl_deletions};
pub(crate) use desk::impl_desk;
pub(crate) use fleet::impl_fleet;
pub(crate) use orgs::impl_organizations;
pub(crate) use runs::impl_runs;
pub(crate) use surveys::impl_surveys;
