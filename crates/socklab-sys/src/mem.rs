//! The C allocator's free memory.

/// Gives the C heap's free memory back to the system (`malloc_trim(0)`: every glibc arena,
/// its top and the free pages inside it); true when some was released. Long-lived
/// multi-threaded servers call it after a flood of connections has drained: glibc keeps what
/// each thread's arena freed, so without it the resident size stays near the largest flood
/// times the number of arenas that served it. A no-op (false) off glibc.
pub fn trim_heap() -> bool {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: malloc_trim takes a byte count and touches only the allocator's own state,
        // under the allocator's locks; it is safe to call from any thread at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        false
    }
}
