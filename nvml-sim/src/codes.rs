//! NVML return codes: names (as used in scenario files) and error strings.

use nvml_wrapper_sys::bindings::*;

/// (scenario name, code, message) for every NVML return code.
const CODES: &[(&str, nvmlReturn_t, &std::ffi::CStr)] = &[
    ("SUCCESS", nvmlReturn_enum_NVML_SUCCESS, c"Success"),
    (
        "UNINITIALIZED",
        nvmlReturn_enum_NVML_ERROR_UNINITIALIZED,
        c"Uninitialized",
    ),
    (
        "INVALID_ARGUMENT",
        nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT,
        c"Invalid Argument",
    ),
    (
        "NOT_SUPPORTED",
        nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED,
        c"Not Supported",
    ),
    (
        "NO_PERMISSION",
        nvmlReturn_enum_NVML_ERROR_NO_PERMISSION,
        c"Insufficient Permissions",
    ),
    (
        "ALREADY_INITIALIZED",
        nvmlReturn_enum_NVML_ERROR_ALREADY_INITIALIZED,
        c"Already Initialized",
    ),
    (
        "NOT_FOUND",
        nvmlReturn_enum_NVML_ERROR_NOT_FOUND,
        c"Not Found",
    ),
    (
        "INSUFFICIENT_SIZE",
        nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE,
        c"Insufficient Size",
    ),
    (
        "INSUFFICIENT_POWER",
        nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_POWER,
        c"Insufficient External Power",
    ),
    (
        "DRIVER_NOT_LOADED",
        nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED,
        c"Driver Not Loaded",
    ),
    ("TIMEOUT", nvmlReturn_enum_NVML_ERROR_TIMEOUT, c"Timeout"),
    (
        "IRQ_ISSUE",
        nvmlReturn_enum_NVML_ERROR_IRQ_ISSUE,
        c"Interrupt request issue",
    ),
    (
        "LIBRARY_NOT_FOUND",
        nvmlReturn_enum_NVML_ERROR_LIBRARY_NOT_FOUND,
        c"NVML Shared Library Not Found",
    ),
    (
        "FUNCTION_NOT_FOUND",
        nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND,
        c"Function Not Found",
    ),
    (
        "CORRUPTED_INFOROM",
        nvmlReturn_enum_NVML_ERROR_CORRUPTED_INFOROM,
        c"Corrupted infoROM",
    ),
    (
        "GPU_IS_LOST",
        nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST,
        c"GPU is lost",
    ),
    (
        "RESET_REQUIRED",
        nvmlReturn_enum_NVML_ERROR_RESET_REQUIRED,
        c"GPU requires restart",
    ),
    (
        "OPERATING_SYSTEM",
        nvmlReturn_enum_NVML_ERROR_OPERATING_SYSTEM,
        c"The operating system has blocked the request",
    ),
    (
        "LIB_RM_VERSION_MISMATCH",
        nvmlReturn_enum_NVML_ERROR_LIB_RM_VERSION_MISMATCH,
        c"RM has detected an NVML/RM version mismatch",
    ),
    (
        "IN_USE",
        nvmlReturn_enum_NVML_ERROR_IN_USE,
        c"In use by another client",
    ),
    (
        "MEMORY",
        nvmlReturn_enum_NVML_ERROR_MEMORY,
        c"Insufficient Memory",
    ),
    ("NO_DATA", nvmlReturn_enum_NVML_ERROR_NO_DATA, c"No data"),
    (
        "VGPU_ECC_NOT_SUPPORTED",
        nvmlReturn_enum_NVML_ERROR_VGPU_ECC_NOT_SUPPORTED,
        c"ECC is not supported on vGPU",
    ),
    (
        "INSUFFICIENT_RESOURCES",
        nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES,
        c"Insufficient resources",
    ),
    (
        "FREQ_NOT_SUPPORTED",
        nvmlReturn_enum_NVML_ERROR_FREQ_NOT_SUPPORTED,
        c"Frequency not supported",
    ),
    (
        "ARGUMENT_VERSION_MISMATCH",
        nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
        c"Argument version mismatch",
    ),
    (
        "DEPRECATED",
        nvmlReturn_enum_NVML_ERROR_DEPRECATED,
        c"Deprecated",
    ),
    (
        "NOT_READY",
        nvmlReturn_enum_NVML_ERROR_NOT_READY,
        c"Not ready",
    ),
    (
        "GPU_NOT_FOUND",
        nvmlReturn_enum_NVML_ERROR_GPU_NOT_FOUND,
        c"GPU not found",
    ),
    (
        "INVALID_STATE",
        nvmlReturn_enum_NVML_ERROR_INVALID_STATE,
        c"Invalid state",
    ),
    (
        "RESET_TYPE_NOT_SUPPORTED",
        nvmlReturn_enum_NVML_ERROR_RESET_TYPE_NOT_SUPPORTED,
        c"Reset type not supported",
    ),
    (
        "UNKNOWN",
        nvmlReturn_enum_NVML_ERROR_UNKNOWN,
        c"Unknown Error",
    ),
];

/// The code for an error name without the `NVML_ERROR_` prefix (`SUCCESS` excluded).
pub fn code_for_name(name: &str) -> Option<nvmlReturn_t> {
    let name = name.strip_prefix("NVML_ERROR_").unwrap_or(name);
    CODES
        .iter()
        .skip(1)
        .find(|(n, _, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, code, _)| *code)
}

/// The static message for a code (as `nvmlErrorString` returns it).
pub fn message(code: nvmlReturn_t) -> &'static std::ffi::CStr {
    CODES
        .iter()
        .find(|(_, c, _)| *c == code)
        .map_or(c"Unknown Error", |(_, _, m)| m)
}

/// All error names accepted in scenario files.
pub fn names() -> impl Iterator<Item = &'static str> {
    CODES.iter().skip(1).map(|(n, _, _)| *n)
}
