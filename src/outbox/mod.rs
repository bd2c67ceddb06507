//! The notification outbox: the contract between the alerting task, which
//! writes a message for each alert transition a receiver is to hear about
//! (in the transaction that stores the transition), and the notifiers,
//! which read and send them ([`crate::notify`]).
//!
//! - [`message`]: the message type, [`OutboxMessage`], stored as JSON in
//!   the Alertmanager webhook v4 shape (so rows written by earlier versions
//!   still read).
//! - [`details`]: what a message says beyond labels and annotations (the
//!   reading behind the alert and its recent history): the types; alerting
//!   gathers them when it writes the message.
//! - [`workload`]: who an alert is about (a workload alert's workload, the
//!   workloads on a GPU alert's GPU), part of the details.
//! - [`store`]: the outbox table's SQL.
//! - [`doorbell`]: rung when rows were added, so receivers wait instead of
//!   polling.
//!
//! Alerting does not import the notifiers, nor the notifiers alerting:
//! both import this module (and [`crate::routing`] for a receiver's
//! route); the Alertmanager re-sends read the firing alerts through a
//! [`crate::notify::FiringAlerts`] source the agent wires.

pub mod details;
pub mod doorbell;
pub mod message;
pub mod store;
pub mod workload;

pub use details::Details;
pub use doorbell::Doorbell;
pub use message::{OutboxAlert, OutboxMessage, Status};
