//! `loci`: the command-line interface, a thin layer over the library (see `cli/`).

mod cli;

/// A bulk load allocates and frees millions of small records (event assertions, edge
/// records, index keys); under glibc's malloc that was a seventh of the ingest, and the
/// open's decode was a third slower. The library leaves the allocator to the program that
/// embeds it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    #[cfg(feature = "mimalloc")]
    allocator::tune();
    cli::main()
}

/// How the binary tunes mimalloc.
#[cfg(feature = "mimalloc")]
mod allocator {
    /// `mi_option_purge_delay` in the mimalloc the `mimalloc` crate builds (v3's
    /// `include/mimalloc.h`; its Rust bindings name only v2's options). The test below
    /// checks the index by v3's default there, which no other option has.
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

    /// Milliseconds before freed memory goes back to the system: v2's default.
    const PURGE_DELAY_MS: std::ffi::c_long = 10;

    /// What `main` sets before anything else: freed memory returned soon, no huge pages.
    pub(crate) fn tune() {
        return_freed_memory_soon();
        no_huge_pages();
    }

    /// mimalloc v3 keeps freed memory for a second before it returns it. A load frees a
    /// batch's records, a snapshot's build and the heap state each snapshot replaces, and
    /// allocates the next before that second is out, so what it freed stayed resident beside
    /// what it used: a 10M-edge load peaked at 81 B/edge where it peaks at 71-73 with this,
    /// and a 1M-edge one at 294-312 where 186-193; ingest pays 5-10% (README, Scale). Set as
    /// the default only: a delay mimalloc read from its environment (`MIMALLOC_PURGE_DELAY`,
    /// in any case, or the older `MIMALLOC_RESET_DELAY`) stays.
    pub(crate) fn return_freed_memory_soon() {
        // SAFETY: writes one aligned `long` of mimalloc's option table, before this program
        // starts a thread; allocations read it (an allocation racing it in a test sees the old
        // delay or the new one).
        unsafe { libmimalloc_sys::mi_option_set_default(PURGE_DELAY, PURGE_DELAY_MS) };
    }

    /// Keeps the kernel from backing this process's memory with transparent huge pages.
    /// mimalloc asks for them on its arenas (`MADV_HUGEPAGE`, before `main`, so its own
    /// option is read too late), and a huge page is resident whole once a byte of it is
    /// written: a retrieval's traversal arrays, sized by the node count and touched in a
    /// few hundred places, took a first question at 20M nodes to 365 MB of heap where it
    /// takes 127 MB without, and a 1M-edge load peaked at 180-184 B/edge where it peaks at
    /// 155-165 (three alternating pairs; README, Scale). Traversals and ingest measured the
    /// same either way, at 1M and 100M. A failure leaves them allowed.
    fn no_huge_pages() {
        #[cfg(target_os = "linux")]
        // SAFETY: `prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)` sets a flag of this process and
        // reads no memory.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_option_set_is_mimallocs_purge_delay() {
            let from_environment = std::env::vars_os().any(|(name, _)| {
                let name = name.to_string_lossy().to_ascii_uppercase();
                name == "MIMALLOC_PURGE_DELAY" || name == "MIMALLOC_RESET_DELAY"
            });
            if from_environment {
                return;
            }
            // SAFETY: reads and sets one aligned `long` of the option table; other test
            // threads' allocations may read it meanwhile, and see the old delay or the new.
            let (default, set) = unsafe {
                let default = libmimalloc_sys::mi_option_get(PURGE_DELAY);
                return_freed_memory_soon();
                (default, libmimalloc_sys::mi_option_get(PURGE_DELAY))
            };
            assert_eq!(default, 1000, "v3's default purge delay is 1000 ms");
            assert_eq!(set, PURGE_DELAY_MS);
        }

        #[cfg(target_os = "linux")]
        #[test]
        fn the_process_asks_for_no_huge_pages() {
            // Not `tune`: it sets the purge delay too, which the test above reads the default
            // of, on another thread. `tests/cli.rs` checks that the binary runs without them.
            no_huge_pages();
            // SAFETY: reads a flag of this process.
            let disabled = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
            assert_eq!(disabled, 1);
        }
    }
}
