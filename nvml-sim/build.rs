//! Marks the simulator library NODELETE: nvml-wrapper unloads the library
//! when its last `Nvml` is dropped, and a re-initialising agent would
//! otherwise reload it with fresh statics — scenario time starting again at
//! zero, as if the machine had rebooted.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
