//! Event sets: Xid and ECC events delivered from the scenario's faults.

use super::calls::guard;
use super::out::out;
use super::state::{self, with_device};
use crate::functions::Func;
use nvml_wrapper_sys::bindings::*;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_uint, c_ulonglong};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Shortest and longest sleep between two looks at the event list.
const POLL_MIN: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_secs(1);

#[derive(Default)]
struct EventSet {
    inner: Mutex<SetState>,
}

#[derive(Default)]
struct SetState {
    /// (GPU index, registered event mask).
    registrations: Vec<(usize, u64)>,
    /// Indices into `Engine::events()` already delivered by this set.
    delivered: HashSet<usize>,
}

/// Live event sets by handle address.
static SETS: Mutex<Option<HashMap<usize, Arc<EventSet>>>> = Mutex::new(None);

fn sets() -> MutexGuard<'static, Option<HashMap<usize, Arc<EventSet>>>> {
    SETS.lock().unwrap_or_else(|p| p.into_inner())
}

fn lookup(set: nvmlEventSet_t) -> Result<Arc<EventSet>, nvmlReturn_t> {
    sets()
        .as_ref()
        .and_then(|m| m.get(&(set as usize)).cloned())
        .ok_or(nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT)
}

/// Frees every event set (on the last nvmlShutdown).
pub(crate) fn free_all() {
    *sets() = None;
}

/// Creates an event set.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> nvmlReturn_t {
    guard(Func::nvmlEventSetCreate, || {
        // SAFETY: `set` is null or writable (the export's contract, module doc); `out` checks null.
        let slot = unsafe { out(set) }?;
        state::runtime()?;
        let new = Arc::new(EventSet::default());
        let handle = Arc::as_ptr(&new) as nvmlEventSet_t;
        sets()
            .get_or_insert_with(HashMap::new)
            .insert(handle as usize, new);
        *slot = handle;
        Ok(())
    })
}

/// Registers `device` for the event types in `event_types` on `set`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    event_types: c_ulonglong,
    set: nvmlEventSet_t,
) -> nvmlReturn_t {
    guard(Func::nvmlDeviceRegisterEvents, || {
        let target = lookup(set)?;
        with_device(device, |rt, index, t| {
            let gpu = rt
                .engine
                .gpu(index)
                .ok_or(nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT)?;
            gpu.check(None, t).map_err(state::code)?;
            if event_types & !gpu.supported_events() != 0 {
                return Err(nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED);
            }
            let mut inner = target.inner.lock().unwrap_or_else(|p| p.into_inner());
            match inner.registrations.iter_mut().find(|(g, _)| *g == index) {
                Some((_, mask)) => *mask |= event_types,
                None => inner.registrations.push((index, event_types)),
            }
            Ok(())
        })
    })
}

/// Waits up to `timeout_ms` for the next undelivered event; TIMEOUT if none.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    guard(Func::nvmlEventSetWait_v2, || {
        // SAFETY: `data` is null or writable (the export's contract, module doc); `out` checks null.
        let data = unsafe { out(data) }?;
        let target = lookup(set)?;
        let rt = state::runtime()?;
        let deadline = Instant::now() + Duration::from_millis(u64::from(timeout_ms));
        loop {
            let now = rt.clock.now();
            let next_at = {
                let mut inner = target.inner.lock().unwrap_or_else(|p| p.into_inner());
                let pending = rt.engine.events().iter().enumerate().filter(|(i, e)| {
                    !inner.delivered.contains(i)
                        && inner
                            .registrations
                            .iter()
                            .any(|(g, mask)| *g == e.gpu && mask & e.event_type != 0)
                });
                let next = pending.clone().find(|(_, e)| e.at <= now);
                if let Some((i, event)) = next {
                    inner.delivered.insert(i);
                    *data = nvmlEventData_t {
                        device: state::handle(event.gpu),
                        eventType: event.event_type,
                        eventData: event.data,
                        gpuInstanceId: u32::MAX,
                        computeInstanceId: u32::MAX,
                    };
                    return Ok(());
                }
                pending.map(|(_, e)| e.at).reduce(f64::min)
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(nvmlReturn_enum_NVML_ERROR_TIMEOUT);
            }
            // Sleep until the next event is due (as the real driver blocks
            // until one arrives), never longer than the caller's timeout,
            // and re-check at least every POLL_MAX in case the clock is
            // unusual.
            let until_next = next_at
                .and_then(|at| rt.clock.real_delay(at - now))
                .unwrap_or(left);
            std::thread::sleep(left.min(until_next).min(POLL_MAX).max(POLL_MIN));
        }
    })
}

/// Frees an event set.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> nvmlReturn_t {
    guard(Func::nvmlEventSetFree, || {
        state::runtime()?;
        sets()
            .as_mut()
            .and_then(|m| m.remove(&(set as usize)))
            .map(drop)
            .ok_or(nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT)
    })
}
