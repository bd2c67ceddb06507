//! The gpuwatch binary: parses the command line and hands over to
//! `gpuwatch::app`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use gpuwatch::app::{self, RunOptions, SourceOptions};

const EXAMPLES: &str = "Examples:
  gpuwatch run --simulate                      # simulated GPUs, no driver needed
  gpuwatch run --simulate thermal-incident     # a built-in scenario
  gpuwatch run --simulate my-scenario.toml     # your own scenario file
  gpuwatch run --config /etc/gpuwatch/gpuwatch.toml
  gpuwatch run --metrics-compat dcgm,nvidia_smi  # also dcgm-exporter's and nvidia_gpu_exporter's names
  gpuwatch status                              # one sample, as a table
  gpuwatch status --simulate h100x8 --json
  gpuwatch validate --config gpuwatch.toml

Built-in scenarios: demo, desktop-rtx3090, h100x8, thermal-incident, memory-pressure, faults, golden";

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
    },
    /// Check a configuration file and print every problem with file, line and field.
    Validate {
        /// Configuration file (TOML).
        #[arg(long, short, value_name = "FILE", env = "GPUWATCH_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Take one sample and print it as a table (or JSON).
    Status {
        #[command(flatten)]
        source: SourceArgs,
        /// Print the snapshot as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
struct SourceArgs {
    /// Configuration file (TOML); every field is optional.
    #[arg(long, short, value_name = "FILE", env = "GPUWATCH_CONFIG")]
    config: Option<PathBuf>,
    /// NVML library to load instead of the system's libnvidia-ml.so.1.
    #[arg(long, value_name = "PATH", conflicts_with = "simulate")]
    nvml_library: Option<PathBuf>,
    /// Use simulated GPUs: the built-in demo, a built-in scenario by name, or a scenario file.
    #[arg(long, value_name = "SCENARIO", num_args = 0..=1)]
    simulate: Option<Option<String>>,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            source,
            listen,
            metrics_compat,
        } => app::run(RunOptions {
            source: source.into(),
            listen,
            metrics_compat,
        })
        .map(|()| true),
        Command::Validate { config } => app::validate(config.as_deref()),
        Command::Status { source, json } => app::status(source.into(), json).map(|()| true),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
