//! The `dpsynth` binary's global allocator: [`System`], except that an allocation it refuses (`ulimit -v`,
//! an exhausted machine) ends the process with exit code 2, a message saying what can help, and this
//! run's temporary files removed, instead of Rust's abort with "memory allocation of N bytes failed", a
//! backtrace and the temporaries left behind.
//!
//! Stable Rust has no hook for allocation failure (`std::alloc::set_alloc_error_hook` is unstable), so the
//! allocator itself acts when [`System`] returns null. Every null is treated as fatal, also where the
//! caller would have handled it (`try_reserve`, arrow's `try_with_capacity`): dpsynth recovers from none
//! of those, which ended as a panic (an "internal error") or a vaguer message.
//!
//! Only the binary installs it (src/main.rs); the library, and so the Python extension, leaves the host
//! program's allocator alone.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::EXIT_BAD_INPUT;

/// [`System`] with the out-of-memory exit. Every call is forwarded as is; only a null result takes the
/// cold path.
pub struct ExitOnAllocationFailure;

// SAFETY: every method forwards to `System` with the same arguments and returns its result unchanged
// whenever it is not null; a null result never returns.
unsafe impl GlobalAlloc for ExitOnAllocationFailure {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if pointer.is_null() {
            out_of_memory(layout.size());
        }
        pointer
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if pointer.is_null() {
            out_of_memory(layout.size());
        }
        pointer
    }

    #[inline]
    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let pointer = unsafe { System.realloc(pointer, layout, new_size) };
        if pointer.is_null() {
            out_of_memory(new_size);
        }
        pointer
    }

    #[inline]
    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) }
    }
}

/// Set by the first thread whose allocation fails: it alone reports and cleans up.
static EXITING: AtomicBool = AtomicBool::new(false);

/// Reports the failed allocation of `size` bytes, removes this run's temporary files and exits 2. Nothing
/// here may allocate: the allocator has just failed, and would fail again or re-enter this function.
#[cold]
#[inline(never)]
fn out_of_memory(size: usize) -> ! {
    if EXITING.swap(true, Ordering::SeqCst) {
        // Another thread is already on its way out and will end the whole process (`_exit`); a second
        // message or cleanup would only interleave with its own.
        loop {
            // SAFETY: pause() takes no arguments and only waits for a signal.
            unsafe { libc::pause() };
        }
    }
    let removed = crate::io::staging::remove_temporaries_without_allocating();
    let mut buffer = [0u8; MESSAGE_CAPACITY];
    write_to_stderr(message(size, removed, &mut buffer));
    // _exit, not exit: exit would run atexit handlers and flush stdio buffers, which may allocate.
    // SAFETY: _exit ends the process and touches no Rust state.
    unsafe { libc::_exit(EXIT_BAD_INPUT) }
}

const MESSAGE_START: &[u8] = b"dpsynth: out of memory: an allocation of ";
const MESSAGE_FAILED: &[u8] = b" bytes failed";
const MESSAGE_REMOVED: &[u8] = b" (this run's temporary files were removed)";
const MESSAGE_HELP: &[u8] = b"; lower --threads (each worker holds data of its own), or raise the memory limit \
(ulimit -v, or the job's or container's memory).\n";
/// Room for the longest message: the largest `usize` has 20 digits.
const MESSAGE_CAPACITY: usize =
    MESSAGE_START.len() + 20 + MESSAGE_FAILED.len() + MESSAGE_REMOVED.len() + MESSAGE_HELP.len();

/// The message for a failed allocation of `size` bytes, composed in `buffer` (no allocation); it says
/// that the temporary files were removed only when they were.
fn message(size: usize, removed: bool, buffer: &mut [u8; MESSAGE_CAPACITY]) -> &[u8] {
    let mut digits = [0u8; 20];
    let digits = decimal(size, &mut digits);
    let removed = if removed { MESSAGE_REMOVED } else { b"" };
    let mut length = 0;
    for part in [MESSAGE_START, digits, MESSAGE_FAILED, removed, MESSAGE_HELP] {
        buffer[length..length + part.len()].copy_from_slice(part);
        length += part.len();
    }
    &buffer[..length]
}

/// `value` in decimal digits, written at the end of `buffer` (no allocation, unlike `format!`).
fn decimal(mut value: usize, buffer: &mut [u8; 20]) -> &[u8] {
    let mut start = buffer.len();
    loop {
        start -= 1;
        buffer[start] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            return &buffer[start..];
        }
    }
}

/// Writes all of `bytes` to standard error with write(2), directly: `eprintln!` may allocate.
fn write_to_stderr(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: the pointer and length describe a live byte slice.
        let written = unsafe { libc::write(libc::STDERR_FILENO, bytes.as_ptr().cast(), bytes.len()) };
        if written > 0 {
            bytes = &bytes[written as usize..];
        } else if written < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        } else {
            // Standard error closed or full: the exit code still says what happened.
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_in_decimal() {
        let mut buffer = [0u8; 20];
        for (value, text) in
            [(0, "0"), (7, "7"), (10, "10"), (16_777_216, "16777216"), (usize::MAX, "18446744073709551615")]
        {
            assert_eq!(decimal(value, &mut buffer), text.as_bytes());
        }
    }

    #[test]
    fn the_message_names_the_size_and_what_can_help() {
        let mut buffer = [0u8; MESSAGE_CAPACITY];
        let text = std::str::from_utf8(message(usize::MAX, true, &mut buffer)).unwrap().to_string();
        assert!(
            text.starts_with(
                "dpsynth: out of memory: an allocation of 18446744073709551615 bytes failed (this run's temporary \
                 files were removed); lower --threads"
            ),
            "{text}"
        );
        assert!(text.contains("ulimit -v") && text.ends_with(".\n"), "{text}");
        let kept = std::str::from_utf8(message(35, false, &mut buffer)).unwrap();
        assert!(
            kept.starts_with("dpsynth: out of memory: an allocation of 35 bytes failed; lower --threads"),
            "{kept}"
        );
    }
}
