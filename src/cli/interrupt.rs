//! Ctrl-C (SIGINT) and SIGTERM during a command that commits in rounds (`ingest`): taken as a
//! request to stop between two commits, so that every commit the store makes is reported
//! before the process ends. Killed at the signal, a process could leave a commit durable and
//! unreported, and a user restarting from the last line reported would add it twice.
//!
//! A second signal of either kind stops the process at once (the first resets both). A signal
//! the process started with ignored (a background job of a shell without job control, or
//! `nohup`) stays ignored. Only the binary installs handlers; the library leaves signals to
//! its embedder.

use std::sync::atomic::{AtomicI32, Ordering};

/// The first signal received since [`hold`], 0 while none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

/// The signals [`hold`] took (those not ignored at the start), as a bit each.
#[cfg(unix)]
static HELD: AtomicI32 = AtomicI32::new(0);

#[cfg(unix)]
const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

#[cfg(unix)]
const NOTICE: &[u8] = b"\nstopping after the commit in progress (again to stop at once)\n";

#[cfg(unix)]
extern "C" fn on_signal(signal: libc::c_int) {
    // The first names the stop; a later one ends the process before it gets here.
    let _ = RECEIVED.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    let held = HELD.load(Ordering::SeqCst);
    // SAFETY: signal(2) and write(2) are async-signal-safe, and NOTICE is a static buffer.
    // What write returns is of no use: the notice is a courtesy. errno is kept for the code
    // the signal interrupted.
    unsafe {
        #[cfg(target_os = "linux")]
        let errno = *libc::__errno_location();
        // Each held signal back to its default, so that a second of either kind (Ctrl-C, then
        // SIGTERM) stops at once.
        for (bit, s) in SIGNALS.iter().enumerate() {
            if held & (1 << bit) != 0 {
                libc::signal(*s, libc::SIG_DFL);
            }
        }
        libc::write(2, NOTICE.as_ptr().cast(), NOTICE.len());
        #[cfg(target_os = "linux")]
        {
            *libc::__errno_location() = errno;
        }
    }
}

/// From now on, SIGINT and SIGTERM are noted for [`received`] instead of ending the process,
/// each once; a signal that is ignored stays ignored.
pub fn hold() {
    #[cfg(unix)]
    for (bit, signal) in SIGNALS.into_iter().enumerate() {
        // SAFETY: sigaction with a zeroed, then filled, struct and a handler that only
        // stores atomics and calls signal(2) and write(2).
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction == libc::SIG_IGN
            {
                continue;
            }
            HELD.fetch_or(1 << bit, Ordering::SeqCst);
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            // Reads of standard input go on after the first. Both signals are blocked while
            // the handler runs, so that the other's second is not taken as a first.
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            for other in SIGNALS {
                libc::sigaddset(&mut action.sa_mask, other);
            }
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The first signal received since [`hold`], if any.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The signal's name, for the note that says why a command stopped.
pub fn name(signal: i32) -> &'static str {
    #[cfg(unix)]
    if signal == libc::SIGTERM {
        return "SIGTERM";
    }
    let _ = signal;
    "Ctrl-C"
}
