//! What is done to the lake's tables as a whole, one module an operation (as delta-rs keeps
//! one per operation): [`erase`], a session's rows taken out of a survey's three tables, and
//! [`compact`], small events files merged into large sorted ones. Both rewrite files with
//! [`crate::rewrite`] and publish the swap with [`crate::Table::publish`].
pub mod compact;
pub mod erase;
