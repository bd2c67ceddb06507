//! The command line's shared argument groups (the agent to talk to, the
//! GPU source, the history database) and the `silence` subcommands, with
//! their conversions into the library's options.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use gpuwatch::app::history::{DbOptions, ListFormat};
use gpuwatch::app::silence::AgentOptions;
use gpuwatch::app::SourceOptions;

#[derive(Debug, Subcommand)]
pub(crate) enum SilenceCommand {
    /// Add a silence; prints its id.
    Add {
        #[command(flatten)]
        agent: AgentArgs,
        /// A label matcher: label=value, label!=value, label=~regex, label!~regex (repeat; all must match).
        #[arg(long = "match", value_name = "MATCHER", required = true)]
        matchers: Vec<String>,
        /// How long, e.g. 30m, 2h, 1d.
        #[arg(long)]
        duration: String,
        /// Why (required).
        #[arg(long)]
        comment: String,
        /// Who (default USER@host).
        #[arg(long)]
        author: Option<String>,
        /// Start later: an RFC 3339 time (default now).
        #[arg(long, value_name = "TIME")]
        start: Option<String>,
    },
    /// List the active and pending silences.
    List {
        #[command(flatten)]
        agent: AgentArgs,
        /// Also the expired ones (kept 5 days).
        #[arg(long)]
        all: bool,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: ListFormat,
    },
    /// Expire silences now.
    Expire {
        #[command(flatten)]
        agent: AgentArgs,
        /// Silence ids.
        #[arg(required = true)]
        ids: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub(crate) struct AgentArgs {
    /// The agent's URL (default from the config's server.listen: http://127.0.0.1:9842).
    #[arg(long, value_name = "URL", env = "GPUWATCH_URL")]
    pub(crate) url: Option<String>,
    /// Configuration file, for the agent's address and web configuration.
    #[arg(long, short, value_name = "FILE", env = "GPUWATCH_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Basic-auth user; the password comes from GPUWATCH_PASSWORD or --password-file.
    #[arg(long)]
    pub(crate) user: Option<String>,
    /// File holding the basic-auth password.
    #[arg(long, value_name = "FILE", requires = "user")]
    pub(crate) password_file: Option<PathBuf>,
    /// CA certificate (PEM) to check the agent's TLS certificate against.
    #[arg(long, value_name = "FILE")]
    pub(crate) ca_file: Option<PathBuf>,
}

impl From<AgentArgs> for AgentOptions {
    fn from(args: AgentArgs) -> Self {
        AgentOptions {
            url: args.url,
            config: args.config,
            user: args.user,
            password_file: args.password_file,
            ca_file: args.ca_file,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct SourceArgs {
    /// Configuration file (TOML); every field is optional.
    #[arg(long, short, value_name = "FILE", env = "GPUWATCH_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// NVML library to load instead of the system's libnvidia-ml.so.1.
    #[arg(long, value_name = "PATH", conflicts_with = "simulate")]
    pub(crate) nvml_library: Option<PathBuf>,
    /// Use simulated GPUs: the built-in demo, a built-in scenario by name, or a scenario file.
    #[arg(long, value_name = "SCENARIO", num_args = 0..=1)]
    pub(crate) simulate: Option<Option<String>>,
}

#[derive(Debug, Args)]
pub(crate) struct DbArgs {
    /// Configuration file naming the database (history.path).
    #[arg(long, short, value_name = "FILE", env = "GPUWATCH_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// The history database file (default: the agent's).
    #[arg(long, value_name = "PATH")]
    pub(crate) db: Option<PathBuf>,
}

impl From<DbArgs> for DbOptions {
    fn from(args: DbArgs) -> Self {
        DbOptions {
            config: args.config,
            db: args.db,
        }
    }
}

impl From<SourceArgs> for SourceOptions {
    fn from(args: SourceArgs) -> Self {
        SourceOptions {
            config: args.config,
            nvml_library: args.nvml_library,
            simulate: args.simulate,
        }
    }
}
