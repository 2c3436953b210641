/// An allocation that fails ends the run with exit 2, a message and the temporaries removed, not an abort
/// (src/out_of_memory.rs). Declared here, not in the library, so that programs linking the library (the
/// Python extension) keep their own allocator.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: dpsynth::out_of_memory::ExitOnAllocationFailure = dpsynth::out_of_memory::ExitOnAllocationFailure;

fn main() {
    std::process::exit(dpsynth::cli::main());
}
