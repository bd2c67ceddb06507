//! gpuwatch: a per-node NVIDIA GPU monitoring agent.
//!
//! # A tour
//! Data flows one way:
//!
//! ```text
//! NVML ──▶ sampler thread ──▶ Arc<Snapshot> ─┬─ watch (latest wins) ──▶ exporter (/metrics)
//!                                             └─ bounded queue ──▶ history writer (SQLite)
//! ```
//!
//! - [`gpu`]: the snapshot types every component reads, and the NVML adapter
//!   (`gpu::nvml`), the only module that talks to NVML.
//! - [`sampler`]: the thread that owns NVML, reads the GPUs on fast, slow and
//!   process tiers, counts Xid events on a second thread, and publishes each
//!   snapshot. A watchdog notices a hung driver.
//! - [`health`]: the kernel-log reader (Xid with their text, SXid, the
//!   backlog since boot) and NVIDIA's Xid catalog.
//! - [`exporter`]: encodes the latest snapshot as Prometheus metrics.
//! - [`history`]: the local SQLite history (writer task fed by the sampler's
//!   queue, rollups, retention, queries for the API and CLI).
//! - [`http`]: the hyper server for /metrics, health, readiness, the history
//!   API and the built-in web view (live GPUs, history charts, alerts).
//! - [`rules`]: the alerting rules engine's pure core (rule types, the
//!   built-in pack, conditions, evaluation into alert transitions).
//! - [`config`]: the TOML configuration, validated with file/line/field errors.
//! - [`limits`], [`problem`]: leaves the configuration and the parsers that
//!   are not the configuration (rules, web configuration) share: the range
//!   of every setting, sizes and durations as written, and one problem of a
//!   file.
//! - [`sim`]: finding the NVML simulator library and its scenarios, for
//!   `--simulate`.
//! - `status`: the `gpuwatch status` table.
//! - [`alerting`]: the task that runs the [`rules`] on every snapshot,
//!   persists their state and transitions, and feeds `gpuwatch_alerts` and
//!   `/api/v1/alerts`; silences, inhibition of a lost GPU's alerts, routes
//!   per receiver, repeats and grouping decide which notifications it
//!   writes to the outbox.
//! - [`families`]: the metric-family encoder (a family from a list of
//!   series) that every exporter of metrics uses.
//! - [`routing`]: label matchers and each receiver's route, read by
//!   [`alerting`] and [`notify`] alike.
//! - [`outbox`]: the notification outbox, the contract between
//!   [`alerting`], which writes an [`outbox::OutboxMessage`] with each alert
//!   transition, and [`notify`], which reads them: the message type (the
//!   Alertmanager webhook v4 JSON), its details, the table's SQL.
//! - [`notify`]: a dispatcher per receiver (webhook, Alertmanager push,
//!   email) that sends its outbox rows, with retries.
//! - [`workload`]: who used each GPU (Slurm job, pod, container, process)
//!   and how well: GPU-seconds, SM-active seconds and energy per workload,
//!   a pure fold over snapshots.
//! - [`capacity`]: "how many more fit": workload profiles against each
//!   GPU's free memory, compute mode, MIG instances and SM share.
//! - [`kubernetes`]: asks the kubelet's pod-resources socket which pod and
//!   container hold each GPU, for the sampler to name the pods of processes.
//! - `files`: reading files named from outside (configuration, secrets,
//!   certificates) with a size limit, never blocking on a FIFO.
//! - [`timespec`]: times, durations and counts from outside (query
//!   parameters, request bodies, command-line arguments), checked into a
//!   range once so nothing downstream overflows or panics.
//! - [`escape`]: control characters of outside text escaped before it
//!   reaches a terminal or the log.
//! - [`panics`]: panics in request handlers and long-lived tasks, caught,
//!   logged and counted (`gpuwatch_panics_total`), never silent.
//! - [`remediation`]: acting on health: the task that reads each
//!   snapshot's verdict and drains the node in Slurm (dry-run by default),
//!   recording every decision in history, metrics and the outbox.
//! - [`app`]: the commands, as the binary runs them.
//!
//! # Layers
//! Imports go one way; `tests/layering.rs` fails on any circle between
//! source files or between these modules, and on any import against the
//! data flow (its `FLOW` table, which sees through re-exports). From the
//! bottom: the leaves `escape`, `timespec`, `limits`, `problem`, `files`
//! and the model `gpu` → `families` (the metric-family encoder every
//! exporter of metrics uses), `kubernetes`, `workload` → `panics`,
//! `sampler` → `health`, `capacity` → `rules`, `exporter`, `history`,
//! `sim`, `status` → `outbox`, `routing` → `alerting`, `notify` (siblings:
//! alerting writes outbox rows; the notifiers read them, and the firing
//! alerts through a source the agent wires) → `config` → `remediation` →
//! `http` → `app`.

// Tokio time in async code (see clippy.toml); blocking threads allow std
// time where they use it, with the reason.
#![warn(clippy::disallowed_types, clippy::disallowed_methods)]
// Every `unsafe` operation sits in its own block with a `// SAFETY:`
// comment saying why it holds (clippy checks the comments), also inside an
// `unsafe fn`.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
// Every public item says what it is for (issue 26): the build holds the line.
#![deny(missing_docs)]

pub mod alerting;
pub mod app;
pub mod capacity;
pub mod config;
pub mod escape;
pub mod exporter;
pub mod families;
pub(crate) mod files;
pub mod gpu;
pub mod health;
pub mod history;
pub mod http;
pub mod kubernetes;
pub mod limits;
pub mod notify;
pub mod outbox;
pub mod panics;
pub mod problem;
pub mod remediation;
pub mod routing;
pub mod rules;
pub mod sampler;
pub mod sim;
pub(crate) mod status;
pub mod timespec;
pub mod workload;
