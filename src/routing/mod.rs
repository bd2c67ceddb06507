//! Which alerts a receiver gets: label [`matcher`]s (also what silences
//! match with) and each receiver's [`route`]. Both sides read it: alerting,
//! which plans the notifications, and the notifiers, whose Alertmanager
//! re-sends keep to the same route; so it lives in neither. Imports only
//! the rules' `Severity` and the label-value quoting of [`crate::timespec`].

pub mod matcher;
pub mod route;

pub use route::{Destination, Route};
