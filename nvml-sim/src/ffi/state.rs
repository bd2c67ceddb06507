//! The loaded library state: init reference count, the running engine and
//! its clock, and device handles.

use crate::clock::SimClock;
use crate::engine::{Engine, Gate, GpuSim, Unavailable};
use crate::scenario::Scenario;
use nvml_wrapper_sys::bindings::*;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// Most GPUs a scenario may describe (handles come from a fixed static table).
pub(crate) const MAX_DEVICES: usize = 1024;

/// Device handles point into this table, so they stay valid for the process
/// lifetime and can be validated without dereferencing them.
static DEVICE_SLOTS: [u8; MAX_DEVICES] = [0; MAX_DEVICES];

/// A scenario being run: the engine and its clock.
#[derive(Debug)]
pub(crate) struct Runtime {
    /// The engine.
    pub engine: Engine,
    /// Scenario time source.
    pub clock: SimClock,
    /// Where the scenario came from (`builtin:NAME` or a path).
    pub origin: String,
}

#[derive(Default)]
struct State {
    refcount: u32,
    runtime: Option<Arc<Runtime>>,
}

static STATE: RwLock<State> = RwLock::new(State {
    refcount: 0,
    runtime: None,
});

fn read_state() -> std::sync::RwLockReadGuard<'static, State> {
    STATE.read().unwrap_or_else(|p| p.into_inner())
}

fn write_state() -> std::sync::RwLockWriteGuard<'static, State> {
    STATE.write().unwrap_or_else(|p| p.into_inner())
}

/// The running runtime; UNINITIALIZED before init, DRIVER_NOT_LOADED while
/// a `driver_unloaded` fault is active.
pub(crate) fn runtime() -> Result<Arc<Runtime>, nvmlReturn_t> {
    let runtime = read_state()
        .runtime
        .clone()
        .ok_or(nvmlReturn_enum_NVML_ERROR_UNINITIALIZED)?;
    if runtime.engine.driver_unloaded(runtime.clock.now()) {
        return Err(nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED);
    }
    Ok(runtime)
}

/// nvmlInit: loads the scenario when the count goes 0 → 1, then applies
/// init errors; `on_init(runtime, fresh)` runs under the state's lock
/// before the runtime is published (`fresh`: it was loaded just now).
pub(crate) fn init(on_init: impl FnOnce(&Arc<Runtime>, bool)) -> Result<(), nvmlReturn_t> {
    let mut state = write_state();
    let fresh = state.runtime.is_none();
    let runtime = match &state.runtime {
        Some(rt) => Arc::clone(rt),
        None => Arc::new(load().map_err(|message| {
            report_once(&message);
            nvmlReturn_enum_NVML_ERROR_UNKNOWN
        })?),
    };
    if let Some(code) = runtime.engine.init_error(runtime.clock.now()) {
        return Err(code);
    }
    on_init(&runtime, fresh);
    state.runtime = Some(runtime);
    state.refcount += 1;
    Ok(())
}

/// nvmlShutdown: drops the runtime when the count reaches 0, then runs
/// `on_unload` under the state's lock.
pub(crate) fn shutdown(on_unload: impl FnOnce()) -> Result<(), nvmlReturn_t> {
    let mut state = write_state();
    if state.refcount == 0 {
        return Err(nvmlReturn_enum_NVML_ERROR_UNINITIALIZED);
    }
    state.refcount -= 1;
    if state.refcount == 0 {
        state.runtime = None;
        on_unload();
    }
    Ok(())
}

/// Reads the env vars and builds the runtime (error text names file:line).
fn load() -> Result<Runtime, String> {
    let selector = std::env::var(crate::ENV_SCENARIO).unwrap_or_default();
    let selector = if selector.trim().is_empty() {
        "builtin:demo".to_string()
    } else {
        selector
    };
    let (source, origin) = match selector.strip_prefix("builtin:") {
        Some(name) => match crate::builtin::get(name) {
            Some(text) => (text.to_string(), selector.clone()),
            None => {
                return Err(format!(
                    "{}={selector}: no built-in scenario `{name}` (available: {})",
                    crate::ENV_SCENARIO,
                    crate::builtin::NAMES.join(", ")
                ))
            }
        },
        None => match std::fs::read_to_string(&selector) {
            Ok(text) => (text, selector.clone()),
            Err(e) => return Err(format!("{selector}: cannot read scenario: {e}")),
        },
    };
    let scenario = Scenario::parse(&source, &origin).map_err(|e| e.to_string())?;
    if scenario.gpu_count() > MAX_DEVICES {
        return Err(format!(
            "{origin}: {} GPUs exceed the simulator's limit of {MAX_DEVICES}",
            scenario.gpu_count()
        ));
    }
    let clock = SimClock::from_env(scenario.speed())?;
    Ok(Runtime {
        engine: Engine::new(scenario),
        clock,
        origin,
    })
}

/// Prints a load error to stderr, once per distinct message.
fn report_once(message: &str) {
    static LAST: Mutex<Option<String>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if last.as_deref() != Some(message) {
        eprintln!("nvml-sim: invalid scenario: {message}");
        *last = Some(message.to_string());
    }
}

/// The stable handle of GPU `index`.
pub(crate) fn handle(index: usize) -> nvmlDevice_t {
    DEVICE_SLOTS[index..].as_ptr() as nvmlDevice_t
}

/// The index behind a handle, or INVALID_ARGUMENT for foreign pointers.
pub(crate) fn index_of(device: nvmlDevice_t) -> Result<usize, nvmlReturn_t> {
    let base = DEVICE_SLOTS.as_ptr() as usize;
    let offset = (device as usize).wrapping_sub(base);
    if device.is_null() || offset >= MAX_DEVICES {
        Err(nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT)
    } else {
        Ok(offset)
    }
}

/// Maps an engine refusal to its NVML code.
pub(crate) fn code(why: Unavailable) -> nvmlReturn_t {
    match why {
        Unavailable::NotSupported => nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED,
        Unavailable::GpuLost => nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST,
        Unavailable::InvalidArgument => nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT,
    }
}

/// Resolves `device`, honours slow/hang faults (holding no lock while
/// waiting), then runs `body` with the runtime, GPU index and scenario time.
pub(crate) fn with_device<T>(
    device: nvmlDevice_t,
    body: impl FnOnce(&Runtime, usize, f64) -> Result<T, nvmlReturn_t>,
) -> Result<T, nvmlReturn_t> {
    let rt = runtime()?;
    let index = index_of(device)?;
    if index >= rt.engine.gpu_count() {
        return Err(nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT);
    }
    loop {
        match rt.engine.gate(index, rt.clock.now()) {
            Gate::Open => break,
            Gate::Slow(ms) => {
                std::thread::sleep(Duration::from_millis(ms));
                break;
            }
            Gate::Hang(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    body(&rt, index, rt.clock.now())
}

/// [`with_device`] for bodies that only need the GPU and t.
pub(crate) fn on_gpu<T>(
    device: nvmlDevice_t,
    body: impl FnOnce(&GpuSim, f64) -> Result<T, Unavailable>,
) -> Result<T, nvmlReturn_t> {
    with_device(device, |rt, index, t| {
        let gpu = rt
            .engine
            .gpu(index)
            .ok_or(nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT)?;
        body(gpu, t).map_err(code)
    })
}
