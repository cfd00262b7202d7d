//! Calls that may panic, made to return an error instead, silently.
//!
//! redb panics on some damaged pages (an `unreachable!`, a slice index out
//! of range) instead of returning an error. The crates that store on redb
//! (`fraghash-store`, `fraghash-redb`) run every call into it under
//! [`guarded`], which turns such a panic into an error of their own, so
//! that damage is refused and explained, never a crash; each gives the
//! error a panic becomes (its `Corrupt` variant, naming the file).
//!
//! Rust's default panic hook prints a caught panic's message (and, with
//! `RUST_BACKTRACE`, a backtrace) before `catch_unwind` sees it. So the
//! first guarded call installs a hook that stays silent for panics inside
//! a guarded call on the same thread and hands every other panic to the
//! hook that was there before. A program that sets its own hook later
//! replaces this one: caught panics then print again, and are still
//! caught. (A NIF library has its own copy of the standard library, so
//! there this hook sees only the library's panics.)
//!
//! ```
//! use fraghash::guard::guarded;
//!
//! let failed: Result<(), String> = guarded(|| panic!("bad page"), |m| format!("damaged: {m}"));
//! assert_eq!(failed.unwrap_err(), "damaged: bad page");
//! assert_eq!(guarded(|| Ok::<_, String>(7), |m| m.to_owned()), Ok(7));
//! ```

use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// How many guarded calls this thread is inside (they nest: a write
    /// reads, a flush commits).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

static QUIET_HOOK: Once = Once::new();

/// Whether this thread is inside a guarded call.
fn inside_guard() -> bool {
    DEPTH.try_with(|d| d.get() > 0).unwrap_or(false)
}

fn install_quiet_hook() {
    // Changing the hook from a panicking thread is itself a panic.
    if std::thread::panicking() {
        return;
    }
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !inside_guard() {
                previous(info);
            }
        }));
    });
}

/// The message a panic's payload carries.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("no message")
}

/// Runs `f`; a panic inside becomes the error `on_panic` makes of the
/// panic's message, and prints nothing. Costs a thread-local counter and
/// a `Once` check when nothing panics. Guarded calls nest.
pub fn guarded<T, E>(
    f: impl FnOnce() -> Result<T, E>,
    on_panic: impl FnOnce(&str) -> E,
) -> Result<T, E> {
    install_quiet_hook();
    DEPTH.with(|d| d.set(d.get() + 1));
    let outcome = catch_unwind(AssertUnwindSafe(f));
    DEPTH.with(|d| d.set(d.get() - 1));
    outcome.unwrap_or_else(|payload| Err(on_panic(panic_message(&*payload))))
}

/// A value whose drop runs guarded, and whose drop's panic is swallowed,
/// silently: a drop has no caller to tell. Dropping a redb database closes
/// it, and redb commits then: on some damaged files that commit panics,
/// after every call had returned its error.
pub struct QuietDrop<T> {
    /// Always `Some` until the drop or [`QuietDrop::into_inner`] takes it.
    value: Option<T>,
}

impl<T> QuietDrop<T> {
    /// Wraps `value`.
    pub fn new(value: T) -> QuietDrop<T> {
        QuietDrop { value: Some(value) }
    }

    /// The value, unwrapped: its drop is the caller's again (to close a
    /// database and hear how that went).
    pub fn into_inner(mut self) -> T {
        self.value
            .take()
            .expect("only the drop and into_inner take it")
    }
}

impl<T> Deref for QuietDrop<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.value
            .as_ref()
            .expect("only the drop and into_inner take it")
    }
}

impl<T> DerefMut for QuietDrop<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
            .as_mut()
            .expect("only the drop and into_inner take it")
    }
}

impl<T> Drop for QuietDrop<T> {
    fn drop(&mut self) {
        if let Some(value) = self.value.take() {
            let _ = guarded(
                || {
                    drop(value);
                    Ok(())
                },
                |_| (),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_callers_error() {
        let e = guarded::<(), String>(
            || panic!("entered unreachable code"),
            |m| format!("failed: {m}"),
        )
        .unwrap_err();
        assert_eq!(e, "failed: entered unreachable code");
        assert!(!inside_guard(), "the depth is restored after a panic");
        // A payload that is not text.
        let e = guarded::<(), String>(|| std::panic::panic_any(7), str::to_owned).unwrap_err();
        assert_eq!(e, "no message");
    }

    #[test]
    fn results_pass_through_and_calls_nest() {
        assert_eq!(guarded(|| Ok::<_, String>(7), str::to_owned), Ok(7));
        assert_eq!(
            guarded(|| Err::<(), _>("mine".to_owned()), str::to_owned),
            Err("mine".to_owned())
        );
        let inner = guarded(
            || {
                let e = guarded::<(), String>(|| panic!("inner"), str::to_owned);
                assert!(inside_guard(), "still inside the outer call");
                Ok::<_, String>(e)
            },
            str::to_owned,
        );
        assert_eq!(inner, Ok(Err("inner".to_owned())));
        assert!(!inside_guard());
    }

    struct PanicsOnDrop;

    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("commit on close failed");
        }
    }

    #[test]
    fn a_quiet_drop_swallows_the_panic() {
        drop(QuietDrop::new(PanicsOnDrop));
        let mut v = QuietDrop::new(vec![1]);
        v.push(2);
        assert_eq!(*v, [1, 2]);
        assert_eq!(v.into_inner(), [1, 2]);
    }
}
