//! nvmlInit and nvmlShutdown: the library state's reference count, and what
//! starts and stops with a loaded scenario (the kernel-log writer, the
//! per-function latencies, event sets and GPM samples).

use super::calls::{set_latencies, NvmlResult};
use super::state;

/// Takes an init reference, loading the scenario on the first.
pub(crate) fn init() -> NvmlResult {
    state::init(|runtime, fresh| {
        if fresh {
            super::kmsg::start(runtime);
        }
        set_latencies(&runtime.engine.scenario().function_latency_us);
    })
}

/// Drops an init reference; at zero the scenario is unloaded and what
/// belonged to it freed.
pub(crate) fn shutdown() -> NvmlResult {
    state::shutdown(|| {
        set_latencies(&Default::default());
        super::events::free_all();
        super::gpm::free_all();
    })
}
