//! Helpers for writing results through C pointers.

use super::calls::NvmlResult;
use nvml_wrapper_sys::bindings::*;
use std::ffi::{c_char, c_uint};

/// Turns an output pointer into a reference, or INVALID_ARGUMENT when null.
///
/// # Safety
/// `ptr` must be null or valid for writes of `T`.
pub(crate) unsafe fn out<'a, T>(ptr: *mut T) -> Result<&'a mut T, nvmlReturn_t> {
    // SAFETY: `ptr` is null (`as_mut` gives `None`) or valid for writes of
    // `T` (this function's contract).
    unsafe { ptr.as_mut() }.ok_or(nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT)
}

/// Copies `text` and a NUL into `buf` of `len` bytes (INSUFFICIENT_SIZE if it does not fit).
///
/// # Safety
/// `buf` must be null or valid for `len` bytes of writes.
pub(crate) unsafe fn write_str(buf: *mut c_char, len: c_uint, text: &str) -> NvmlResult {
    if buf.is_null() {
        return Err(nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT);
    }
    let bytes = text.as_bytes();
    if bytes.len() + 1 > len as usize {
        return Err(nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE);
    }
    // SAFETY: `buf` is not null and valid for `len` bytes of writes (this
    // function's contract), and `bytes.len() + 1 <= len` was checked above:
    // the text and its NUL fit; a `&str` does not overlap a C buffer we write.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, bytes.len());
        *buf.add(bytes.len()) = 0;
    }
    Ok(())
}

/// Copies `text` into a fixed C char array, truncating and NUL-terminating.
pub(crate) fn fill_array(dest: &mut [c_char], text: &str) {
    let n = text.len().min(dest.len().saturating_sub(1));
    for (d, s) in dest.iter_mut().zip(text.bytes().take(n)) {
        *d = s as c_char;
    }
    if let Some(end) = dest.get_mut(n) {
        *end = 0;
    }
}

/// Microseconds since the Unix epoch (field value / violation timestamps).
pub(crate) fn epoch_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}
