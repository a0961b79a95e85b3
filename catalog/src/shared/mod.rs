//! What the two catalog backends share: every trait method whose SQL is the same in both
//! dialects is written once here, in [`impl_catalog!`], which each backend invokes with the
//! methods it writes its own way (upserts, row locks, advisory locks, batch inserts and the
//! other places where SQLite and PostgreSQL differ).
//!
//! The shared SQL uses PostgreSQL's numbered placeholders (`$1`, `$2`, ...), which sqlx's SQLite
//! driver binds by number too, and forms both dialects read the same way (`ON CONFLICT ... DO
//! NOTHING`, `RETURNING`, row values). The methods are expanded inside each backend's module, so
//! the names they use resolve there: the helpers (`insert_tombstoned_identifiers`,
//! `lock_tombstone_ids`) and `SKIP_LOCKED`, the clause that makes a claim skip rows another
//! instance is claiming (PostgreSQL's `FOR UPDATE SKIP LOCKED`; nothing in SQLite, which has one
//! writer at a time).
//!
//! rustfmt does not format inside a macro invocation's braces: the backends' own methods, passed
//! in, keep the formatting they are written with.
//!
//! The methods are grouped by role, a macro and a file each: `orgs` (organizations and keys),
//! `surveys` (surveys and the log consumers' watermarks), `runs` (scoring runs), `deletions`
//! (deletions and tombstones) and `fleet` (instances and compaction claims). A trait's methods
//! must be in one `impl`, so `impl_catalog!` chains them: each macro appends its methods to the
//! ones it is handed and passes them to the next named, and the last, `emit_catalog_impl!`,
//! writes the `impl`.

mod deletions;
mod fleet;
mod orgs;
mod runs;
mod surveys;

pub(crate) use deletions::{deletion_methods, erase_session_rows_in};
pub(crate) use fleet::fleet_methods;
pub(crate) use orgs::organization_methods;
pub(crate) use runs::run_methods;
pub(crate) use surveys::survey_methods;

/// `impl Catalog for $backend` (a struct with a sqlx `pool`): the backend's own methods, then
/// the shared ones, role by role.
macro_rules! impl_catalog {
    ($backend:ty, { $($own:tt)* }) => {
        $crate::shared::organization_methods!(
            $backend,
            { $($own)* },
            survey_methods,
            run_methods,
            deletion_methods,
            fleet_methods,
            emit_catalog_impl
        );
    };
}

pub(crate) use impl_catalog;

/// The end of `impl_catalog!`'s chain: one `impl Catalog` of every method gathered on the way.
macro_rules! emit_catalog_impl {
    ($backend:ty, { $($methods:tt)* }) => {
        #[async_trait::async_trait]
        impl $crate::Catalog for $backend {
            $($methods)*
        }
    };
}

pub(crate) use emit_catalog_impl;
