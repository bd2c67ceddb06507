//! The gpuwatch binary: parses the command line and hands over to
//! `gpuwatch::app`.

// Every `unsafe` operation sits in its own block with a `// SAFETY:`
// comment saying why it holds (clippy checks the comments), also inside an
// `unsafe fn`.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gpuwatch::app::alerts::AlertsOptions;
use gpuwatch::app::history::{EventsOptions, HistoryOptions, ListFormat, OutputFormat};
use gpuwatch::app::jobs::{JobsFormat, JobsOptions, JobsSort};
use gpuwatch::app::npd::HealthOptions;
use gpuwatch::app::silence::AddOptions;
use gpuwatch::app::{self, RunOptions};

#[path = "main_args.rs"]
mod args;
use args::{AgentArgs, DbArgs, SilenceCommand, SourceArgs};

const EXAMPLES: &str = "Examples:
  gpuwatch run --simulate                      # simulated GPUs, no driver needed
  gpuwatch run --simulate thermal-incident     # a built-in scenario
  gpuwatch run --simulate my-scenario.toml     # your own scenario file
  gpuwatch run --config /etc/gpuwatch/gpuwatch.toml
  gpuwatch run --metrics-compat dcgm,nvidia_smi  # also dcgm-exporter's and nvidia_gpu_exporter's names
  gpuwatch status                              # one sample, as a table
  gpuwatch status --simulate h100x8 --json
  gpuwatch capacity --profile resnet50-inference  # how many more fit, per GPU and node
  gpuwatch validate --config gpuwatch.toml
  gpuwatch config-schema > gpuwatch.schema.json  # for editors (taplo, Even Better TOML)
  gpuwatch history --gpu 3 --metric temperature --since 6h --step 1m
  gpuwatch events --since 1d
  gpuwatch alerts --since 1d                   # alerts now and their history
  gpuwatch silence add --match alertname=GpuHot --match gpu=0 --duration 2h --comment 'fan swap'
  gpuwatch silence list
  gpuwatch silence expire 3
  gpuwatch health --npd                        # node-problem-detector plugin: exit 0 ok, 1 problem, 2 unknown
  gpuwatch health --npd --action RESET_GPU     # only GPUs that need a reset
  gpuwatch run --web-config /etc/gpuwatch/web.yml  # TLS and basic auth

Built-in scenarios: demo, desktop-rtx3090, h100x8, thermal-incident, memory-pressure, faults, golden, h200, workloads, health";

/// Per-node NVIDIA GPU monitoring agent: samples NVML, serves Prometheus metrics.
#[derive(Debug, Parser)]
#[command(name = "gpuwatch", version, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent: sample the GPUs and serve /metrics.
    Run {
        #[command(flatten)]
        source: SourceArgs,
        /// Address to listen on, e.g. 0.0.0.0:9842 or :9842 (default from the config: 0.0.0.0:9842).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// Also export another exporter's metric names, for its dashboards and alerts: dcgm, nvidia_smi (repeat or comma-separate; "none" for neither). Overrides server.metrics_compat.
        #[arg(long, value_name = "SET")]
        metrics_compat: Vec<String>,
        /// Also export detail sets beyond the default families: nvlink_links, media_engines, gpm_pipes, processes, collector_groups, rule_values, or full (repeat or comma-separate; "none" for none). Overrides exporter.detail.
        #[arg(long, value_name = "SET")]
        metrics_detail: Vec<String>,
        /// Web configuration (exporter-toolkit format): TLS and basic auth for every path (overrides server.web_config).
        #[arg(long, value_name = "FILE")]
        web_config: Option<PathBuf>,
        /// History database file (overrides history.path).
        #[arg(long, value_name = "PATH")]
        history_db: Option<PathBuf>,
        /// Move the existing history database aside (to PATH.moved-TIME) and start a new one.
        /// Only gpuwatch's history (or a damaged SQLite file) is moved; anything else is refused untouched.
        #[arg(long)]
        reset_history: bool,
        /// Record no history this run.
        #[arg(long, conflicts_with_all = ["history_db", "reset_history"])]
        no_history: bool,
    },
    /// Show one metric of one GPU over time, from the history database.
    History {
        #[command(flatten)]
        db: DbArgs,
        /// GPU index or UUID.
        #[arg(long)]
        gpu: String,
        /// Metric: utilization, memory_used, temperature, power, energy, sm_clock, ... (see docs/history.md).
        #[arg(long)]
        metric: String,
        /// Start: a duration ago (6h, 2d) or a time (RFC 3339, Unix seconds).
        #[arg(long, default_value = "1h")]
        since: String,
        /// End (default now).
        #[arg(long, default_value = "now")]
        until: String,
        /// Resolution, e.g. 10s, 1m, 1h (default: about 240 points).
        #[arg(long)]
        step: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// List recorded events: Xid errors, GPUs lost and recovered, processes starting and stopping.
    Events {
        #[command(flatten)]
        db: DbArgs,
        /// Start: a duration ago (1d) or a time.
        #[arg(long, default_value = "1d")]
        since: String,
        /// End (default now).
        #[arg(long, default_value = "now")]
        until: String,
        /// Only this GPU (index or UUID).
        #[arg(long)]
        gpu: Option<String>,
        /// Only this kind: xid, gpu_lost, gpu_recovered, process_start, process_stop, agent_start, remediation.
        #[arg(long)]
        kind: Option<String>,
        /// Output format (table or json).
        #[arg(long, value_enum, default_value = "table")]
        format: ListFormat,
    },
    /// Who used the GPUs and how well: one line per workload (Slurm job, pod, container, process) with GPU time held, SM-active time, efficiency and energy.
    Jobs {
        #[command(flatten)]
        db: DbArgs,
        /// Start: a duration ago (1d) or a time.
        #[arg(long, default_value = "1d")]
        since: String,
        /// End (default now).
        #[arg(long, default_value = "now")]
        until: String,
        /// Only this kind: slurm_job, pod, container, process.
        #[arg(long)]
        kind: Option<String>,
        /// Only this user.
        #[arg(long)]
        user: Option<String>,
        /// Only workloads that used this GPU (index).
        #[arg(long)]
        gpu: Option<u32>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: JobsFormat,
        /// Order: started (newest first), efficiency (worst first), held (most first).
        #[arg(long, value_enum, default_value = "started")]
        sort: JobsSort,
    },
    /// Show the alerts (pending, firing, recently resolved) and their history, from the history database.
    Alerts {
        #[command(flatten)]
        db: DbArgs,
        /// History from: a duration ago (1d) or a time.
        #[arg(long, default_value = "1d")]
        since: String,
        /// History to (default now).
        #[arg(long, default_value = "now")]
        until: String,
        /// Only this alert (rule name).
        #[arg(long)]
        alertname: Option<String>,
        /// Only this GPU (index or UUID).
        #[arg(long)]
        gpu: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: ListFormat,
    },
    /// Silence alerts (no notifications while silenced), through the running agent's HTTP API.
    Silence {
        #[command(subcommand)]
        command: SilenceCommand,
    },
    /// Ask the running agent for its health verdict; exit 0 when no GPU is
    /// unhealthy, 1 when one is, 2 when the agent cannot be asked
    /// (node-problem-detector's custom-plugin protocol; see --npd).
    Health {
        #[command(flatten)]
        agent: AgentArgs,
        /// Print one short line (the node condition's message) and the details on stderr.
        #[arg(long)]
        npd: bool,
        /// Count degraded GPUs instead of unhealthy ones (for an NPD temporary event).
        #[arg(long)]
        degraded: bool,
        /// Only problems that need this action: RESET_GPU, REBOOT_SYSTEM, INSPECT_HARDWARE, RESET_FABRIC, ... (repeat for several).
        #[arg(long = "action", value_name = "ACTION")]
        actions: Vec<String>,
        /// How long to wait for the agent (NPD kills a plugin after 5 s by default).
        #[arg(long, default_value = "3s")]
        timeout: String,
        /// The message's limit in bytes (NPD's max_output_length).
        #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(u16).range(20..))]
        max_length: u16,
    },
    /// Copy this gpuwatch binary to PATH (for an initContainer: the image has no shell or cp).
    CopyBinary {
        /// Where to put the copy (its directory must exist).
        path: PathBuf,
    },
    /// Check a configuration file and print every problem with file, line and field.
    Validate {
        /// Configuration file (TOML).
        #[arg(long, short, value_name = "FILE", env = "GPUWATCH_CONFIG")]
        config: Option<PathBuf>,
        /// Web configuration to check too (default: the configuration's server.web_config).
        #[arg(long, value_name = "FILE")]
        web_config: Option<PathBuf>,
    },
    /// Print the configuration file's JSON Schema (every key with its type, default and
    /// description), for editors that check and complete TOML, such as taplo or Even Better TOML.
    ConfigSchema,
    /// Take one sample and print it as a table (or JSON).
    Status {
        #[command(flatten)]
        source: SourceArgs,
        /// Print the snapshot as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Take one sample and print how many more instances of each workload
    /// profile ([[profiles]] in the config) fit on each GPU and the node.
    Capacity {
        #[command(flatten)]
        source: SourceArgs,
        /// Only this profile.
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
    },
}

/// Lets a closed standard output end a printing command the way it ends
/// Keeps glibc's allocator from holding memory the agent does not use
/// (issue 23, RSS; docs/benchmarks.md "Footprint"): one arena for every thread instead
/// of one per thread that allocates (the agent's threads allocate little and
/// rarely at once), and fixed trim and mmap thresholds, so that freeing a
/// large buffer (a /metrics body) does not raise them for good and leave
/// the heap's free top resident. Measured side by side with
/// `scripts/bench_agent.py`. Set here rather than through `MALLOC_ARENA_MAX`
/// and friends, so that no unit file or container needs the environment.
fn lean_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it runs first in
    // `main`, before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// `cat` or `ls`: killed by SIGPIPE, quietly (status 141 in a shell), instead
/// of a panic ("failed printing to stdout: Broken pipe") with status 101.
///
/// The Rust runtime ignores SIGPIPE, so a write to a closed pipe fails with
/// EPIPE and `println!` panics on it. Restoring the default disposition is
/// one mechanism for every printing path: our own output, clap's, and what
/// is added later. `run` keeps ignoring SIGPIPE (the agent must never die
/// because something it writes to went away). Sockets are not affected: the
/// standard library writes to TCP and Unix sockets with MSG_NOSIGNAL, so a
/// client command still sees a hung-up server as an error.
fn die_quietly_on_closed_stdout() {
    // SAFETY: `signal` with SIG_DFL has no preconditions; it runs at the start
    // of `main`, before any thread that could be writing exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    lean_allocator();
    // clap swallows EPIPE while printing --help and --version.
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Run { .. }) {
        die_quietly_on_closed_stdout();
    }
    let result = match cli.command {
        Command::Run {
            source,
            listen,
            metrics_compat,
            metrics_detail,
            web_config,
            history_db,
            reset_history,
            no_history,
        } => app::run(RunOptions {
            source: source.into(),
            listen,
            metrics_compat,
            metrics_detail,
            web_config,
            history_db,
            reset_history,
            no_history,
        })
        .map(|()| true),
        Command::History {
            db,
            gpu,
            metric,
            since,
            until,
            step,
            format,
        } => app::history::history(HistoryOptions {
            db: db.into(),
            gpu,
            metric,
            since,
            until,
            step,
            format,
        })
        .map(|()| true),
        Command::Events {
            db,
            since,
            until,
            gpu,
            kind,
            format,
        } => app::history::events(EventsOptions {
            db: db.into(),
            since,
            until,
            gpu,
            kind,
            format,
        })
        .map(|()| true),
        Command::Jobs {
            db,
            since,
            until,
            kind,
            user,
            gpu,
            format,
            sort,
        } => app::jobs::jobs(JobsOptions {
            db: db.into(),
            since,
            until,
            kind,
            user,
            gpu,
            format,
            sort,
        })
        .map(|()| true),
        Command::Alerts {
            db,
            since,
            until,
            alertname,
            gpu,
            format,
        } => app::alerts::alerts(AlertsOptions {
            db: db.into(),
            since,
            until,
            alertname,
            gpu,
            format,
        })
        .map(|()| true),
        Command::Silence { command } => match command {
            SilenceCommand::Add {
                agent,
                matchers,
                duration,
                comment,
                author,
                start,
            } => app::silence::add(AddOptions {
                agent: agent.into(),
                matchers,
                duration,
                start,
                comment,
                author,
            }),
            SilenceCommand::List { agent, all, format } => {
                app::silence::list(agent.into(), all, format)
            }
            SilenceCommand::Expire { agent, ids } => app::silence::expire(agent.into(), &ids),
        }
        .map(|()| true),
        Command::Health {
            agent,
            npd,
            degraded,
            actions,
            timeout,
            max_length,
        } => {
            return ExitCode::from(app::npd::health(HealthOptions {
                agent: agent.into(),
                npd,
                degraded,
                actions,
                timeout,
                max_length: usize::from(max_length),
            }))
        }
        Command::CopyBinary { path } => app::copy_binary::copy_binary(&path).map(|()| true),
        Command::Validate { config, web_config } => {
            app::validate(config.as_deref(), web_config.as_deref())
        }
        Command::ConfigSchema => {
            serde_json::to_string_pretty(&gpuwatch::config::schema::json_schema())
                .map(|text| println!("{text}"))
                .map(|()| true)
                .map_err(anyhow::Error::from)
        }
        Command::Status { source, json } => app::status(source.into(), json).map(|()| true),
        Command::Capacity { source, profile } => {
            app::capacity(source.into(), profile.as_deref()).map(|()| true)
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("error: {}", error_chain(&error));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, joined with ": ", leaving out a cause whose
/// text the message before it already holds (many errors quote their
/// source in their own message), so that no reason is printed twice.
fn error_chain(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_help_lists_every_built_in_scenario_of_the_simulator() {
        let (_, listed) = super::EXAMPLES
            .rsplit_once("Built-in scenarios: ")
            .expect("the examples end with the built-in scenarios");
        let listed: Vec<&str> = listed.split(", ").collect();
        assert_eq!(listed, nvml_sim::builtin::NAMES);
    }
}
