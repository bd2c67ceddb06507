//! Scenario checks for the agent, through the library it loads anyway.
//!
//! The agent validates `--simulate SCENARIO` before it starts, so a mistake
//! is reported with file and line. It asks the simulator library instead of
//! linking the scenario parser into its own binary: the production agent
//! then carries no simulator code at all.

use std::ffi::{c_char, c_int, CStr};

use crate::{builtin, Scenario};

/// The scenario parsed.
pub const SIM_CHECK_VALID: c_int = 0;
/// The scenario did not parse: the message is in the output buffer.
pub const SIM_CHECK_INVALID: c_int = 1;
/// An argument was null or not UTF-8, or the message did not fit.
pub const SIM_CHECK_BAD_ARGUMENT: c_int = 2;

/// Writes `text` (truncated on a character boundary) and a NUL into `buf`.
///
/// # Safety
/// `buf` must be valid for `len` bytes of writes (`len` ≥ 1).
unsafe fn write_message(buf: *mut c_char, len: usize, text: &str) {
    let mut n = text.len().min(len - 1);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: `buf` is valid for `len` bytes of writes (this function's
    // contract) and `n + 1 <= len`: the text and its NUL fit; a `&str` does
    // not overlap the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n) = 0;
    }
}

/// Parses the scenario `source` (from `origin`, a file name used in the
/// messages) as `nvmlInit` would; on failure writes the message (file, line,
/// field) into `message` (`message_len` bytes, NUL-terminated, truncated).
///
/// # Safety
/// `source` and `origin` must be NUL-terminated strings; `message` must be
/// valid for `message_len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSimCheckScenario(
    source: *const c_char,
    origin: *const c_char,
    message: *mut c_char,
    message_len: usize,
) -> c_int {
    if source.is_null() || origin.is_null() || message.is_null() || message_len == 0 {
        return SIM_CHECK_BAD_ARGUMENT;
    }
    // SAFETY: both are non-null (checked above) NUL-terminated strings (this
    // function's contract), read only while this call runs.
    let (source, origin) = unsafe { (CStr::from_ptr(source), CStr::from_ptr(origin)) };
    let (Ok(source), Ok(origin)) = (source.to_str(), origin.to_str()) else {
        return SIM_CHECK_BAD_ARGUMENT;
    };
    let checked = std::panic::catch_unwind(|| Scenario::parse(source, origin).map(|_| ()));
    match checked {
        Ok(Ok(())) => SIM_CHECK_VALID,
        Ok(Err(e)) => {
            // SAFETY: `message` is non-null, valid for `message_len` ≥ 1
            // bytes of writes (checked above; this function's contract).
            unsafe { write_message(message, message_len, &e.to_string()) };
            SIM_CHECK_INVALID
        }
        Err(_) => {
            // SAFETY: as above.
            unsafe { write_message(message, message_len, "the scenario parser panicked") };
            SIM_CHECK_INVALID
        }
    }
}

/// Writes the built-in scenario names, comma-separated and NUL-terminated,
/// into `names`; returns [`SIM_CHECK_BAD_ARGUMENT`] when they do not fit.
///
/// # Safety
/// `names` must be valid for `names_len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSimBuiltinScenarios(names: *mut c_char, names_len: usize) -> c_int {
    let list = builtin::NAMES.join(",");
    if names.is_null() || list.len() + 1 > names_len {
        return SIM_CHECK_BAD_ARGUMENT;
    }
    // SAFETY: `names` is non-null and valid for `names_len` bytes of writes
    // (checked above; this function's contract), and `names_len` ≥ 1.
    unsafe { write_message(names, names_len, &list) };
    SIM_CHECK_VALID
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    /// Checks `source` from `origin` with a message buffer of `len` bytes
    /// (filled with 1s first); returns the code and the buffer.
    fn check_into(source: &str, origin: &str, len: usize) -> (c_int, Vec<c_char>) {
        let source = CString::new(source).expect("no NUL");
        let origin = CString::new(origin).expect("no NUL");
        let mut buf = vec![1 as c_char; len];
        // SAFETY: NUL-terminated strings and a buffer of `buf.len()` bytes, all
        // alive for the call.
        let rc = unsafe {
            nvmlSimCheckScenario(
                source.as_ptr(),
                origin.as_ptr(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        (rc, buf)
    }

    fn check(source: &str) -> (c_int, String) {
        let (rc, buf) = check_into(source, "broken.toml", 512);
        // SAFETY: the simulator NUL-terminated `buf` (every outcome writes a message).
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) };
        (rc, text.to_string_lossy().into_owned())
    }

    #[test]
    fn a_builtin_scenario_is_valid() {
        let demo = builtin::get("demo").expect("demo ships");
        assert_eq!(check(demo).0, SIM_CHECK_VALID);
    }

    #[test]
    fn a_broken_scenario_names_file_and_line() {
        let (rc, text) = check("name = \"x\"\n[[gpu]]\nname = \"A\"\nbogus_key = 1\n");
        assert_eq!(rc, SIM_CHECK_INVALID);
        assert!(text.contains("broken.toml:4"), "{text}");
        assert!(text.contains("bogus_key"), "{text}");
    }

    #[test]
    fn a_long_message_is_truncated_not_overrun() {
        let (rc, buf) = check_into("[[gpu]]\nname = 1\n", &"x".repeat(100), 16);
        assert_eq!(rc, SIM_CHECK_INVALID);
        assert_eq!(buf[15], 0, "NUL-terminated inside the buffer");
    }

    #[test]
    fn the_builtin_names_are_listed() {
        let mut buf = vec![0 as c_char; 1024];
        assert_eq!(
            // SAFETY: a buffer of `buf.len()` bytes, alive for the call.
            unsafe { nvmlSimBuiltinScenarios(buf.as_mut_ptr(), buf.len()) },
            SIM_CHECK_VALID
        );
        // SAFETY: the call succeeded: it wrote a NUL-terminated list.
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        assert_eq!(text.split(',').collect::<Vec<_>>(), builtin::NAMES);
        let mut small = vec![0 as c_char; 4];
        assert_eq!(
            // SAFETY: a buffer of `small.len()` bytes, alive for the call.
            unsafe { nvmlSimBuiltinScenarios(small.as_mut_ptr(), small.len()) },
            SIM_CHECK_BAD_ARGUMENT
        );
    }
}
