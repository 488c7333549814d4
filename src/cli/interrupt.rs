//! Ctrl-C (SIGINT) and SIGTERM during a command that commits in rounds (`ingest`): taken as a
//! request to stop between two commits, so that every commit the store makes is reported
//! before the process ends. Killed at the signal, a process could leave a commit durable and
//! unreported, and a user restarting from the last line reported would add it twice.
//!
//! A second signal stops the process at once (the handler is reset by the first). A signal
//! the process started with ignored (a background job of a shell without job control, or
//! `nohup`) stays ignored. Only the binary installs handlers; the library leaves signals to
//! its embedder.

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal received since [`hold`], 0 while none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

#[cfg(unix)]
const NOTICE: &[u8] = b"\nstopping after the commit in progress (again to stop at once)\n";

#[cfg(unix)]
extern "C" fn on_signal(signal: libc::c_int) {
    RECEIVED.store(signal, Ordering::SeqCst);
    // SAFETY: write(2) is async-signal-safe, and NOTICE is a static buffer. What it returns is
    // of no use: the notice is a courtesy.
    unsafe {
        libc::write(2, NOTICE.as_ptr().cast(), NOTICE.len());
    }
}

/// From now on, SIGINT and SIGTERM are noted for [`received`] instead of ending the process,
/// each once; a signal that is ignored stays ignored.
pub fn hold() {
    #[cfg(unix)]
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction with a zeroed, then filled, struct and a handler that only stores
        // an atomic and calls write(2).
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction == libc::SIG_IGN
            {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            // Reset at the first, so that a second stops at once; reads of standard input
            // go on after the first.
            action.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The signal received since [`hold`], if any.
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
