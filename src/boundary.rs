//! The panic boundary between loci and the libraries that read its files. redb, sled and
//! tantivy can panic (an index out of bounds, a failed assert in a decoder, an unwrap) on a
//! file damaged by a bad disk or a stray write, where they should return an error. loci runs
//! inside its caller's process, so every call into them that reads a file goes through
//! `catch`, which turns the panic into its message for a typed error.
//!
//! A panic caught here is still printed by the process's panic hook, with a backtrace where
//! `RUST_BACKTRACE` is set, before it unwinds to the boundary: to someone reading standard
//! error that looks like a crash, though the caller gets an error and goes on. Which panics
//! will be caught is known only on the panicking thread, so [`catching`] tells a hook whether
//! the panic is inside a boundary; the `loci` binary's hook prints nothing for those (the
//! error names the file and says what panicked), and a program embedding loci can do the
//! same. loci never replaces the hook itself: the hook belongs to the program.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    /// How many boundaries this thread is inside (a boundary can call code with another).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread is running inside a panic boundary: a panic now will be caught and
/// returned as an error. For a panic hook: see the module documentation.
pub fn catching() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

/// Leaves the boundary when dropped, also while unwinding.
struct Inside;

impl Inside {
    fn enter() -> Inside {
        DEPTH.with(|d| d.set(d.get().saturating_add(1)));
        Inside
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Runs `f`, loci's own code called back from inside a boundary (a visitor of a backend's
/// scan), as outside it: a panic there is loci's, and is printed as any other (it is still
/// caught by the boundary around it, which reports it as the dependency's).
pub(crate) fn outside<T>(f: impl FnOnce() -> T) -> T {
    struct Back(u32);
    impl Drop for Back {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(self.0));
        }
    }
    let _back = Back(DEPTH.with(|d| d.replace(0)));
    f()
}

/// Runs `f`, returning the message of a panic in it as the error. `f` is taken as unwind
/// safe: the callers give up on the state it touched (a disabled backend, an index that must
/// be rebuilt) rather than use it after a panic.
pub(crate) fn catch<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    let inside = Inside::enter();
    let outcome = catch_unwind(AssertUnwindSafe(f));
    drop(inside);
    outcome.map_err(|p| panic_message(&*p))
}

/// The text a panic was raised with.
fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_becomes_its_message_and_the_thread_leaves_the_boundary() {
        assert!(!catching());
        let r: Result<(), String> = catch(|| {
            assert!(catching());
            let inner = catch(|| panic!("inner {}", 1));
            assert_eq!(inner, Err("inner 1".to_string()));
            assert!(catching(), "still inside the outer boundary");
            panic!("outer")
        });
        assert_eq!(r, Err("outer".to_string()));
        assert!(!catching());
        assert_eq!(catch(|| 5), Ok(5));
        let r = catch(|| {
            outside(|| assert!(!catching(), "a callback runs as outside"));
            assert!(catching(), "and the boundary is back after it");
        });
        assert_eq!(r, Ok(()));
    }
}
