//! tch raises libtorch's errors in its infallible calls (a layer's forward,
//! tensor operators, `Tensor::stack`) as panics: `called Result::unwrap() on
//! an Err value: Torch("CUDA out of memory. ...")`. An out-of-memory error in
//! a step must be recoverable like one from an `f_` call, so the step runs
//! under `catch`, which turns such a panic back into the `TchError` libtorch
//! raised and keeps the panic hook from printing it as a crash. Unwinding
//! drops the step's tensors, which frees their memory.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;
use tch::TchError;

thread_local! {
    /// Inside `catch` on this thread: panics are returned, not printed.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    /// Where the last caught panic was raised, for panics that are not tch's.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f`; a panic inside it comes back as `TchError::Torch` with
/// libtorch's own message (or the panic's message and place, for any other
/// panic), so the caller classifies it like any libtorch error.
pub fn catch<T>(f: impl FnOnce() -> Result<T, TchError>) -> Result<T, TchError> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                LOCATION.with(|l| *l.borrow_mut() = info.location().map(|l| l.to_string()));
            } else {
                previous(info);
            }
        }));
    });
    let outer = CATCHING.with(|c| c.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(outer));
    result.unwrap_or_else(|payload| {
        let place = LOCATION.with(|l| l.borrow_mut().take());
        Err(TchError::Torch(message(payload.as_ref(), place)))
    })
}

fn message(payload: &(dyn Any + Send), place: Option<String>) -> String {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message");
    match libtorch_text(text) {
        Some(inner) => inner,
        None => match place {
            Some(p) => format!("panic at {p}: {text}"),
            None => format!("panic: {text}"),
        },
    }
}

/// libtorch's message inside tch's `...: Torch("...")` (the Debug form of
/// `TchError::Torch`), with Debug's escapes undone.
fn libtorch_text(text: &str) -> Option<String> {
    let start = text.find("Torch(\"")? + "Torch(\"".len();
    let end = text.rfind("\")")?;
    let quoted = text.get(start..end)?;
    let mut out = String::with_capacity(quoted.len());
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some(other @ ('"' | '\'' | '\\')) => out.push(other),
            // \u{...} and anything else: kept as written.
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training::fault::IMPOSSIBLE_FLOATS as IMPOSSIBLE;
    use tch::{Device, Kind, Tensor};

    #[test]
    fn a_real_libtorch_error_raised_as_a_panic_comes_back_as_its_error() {
        let r = catch(|| Ok(Tensor::empty([IMPOSSIBLE], (Kind::Float, Device::Cpu))));
        let Err(TchError::Torch(m)) = r else {
            panic!("expected a libtorch error, got {r:?}");
        };
        assert!(
            m.contains("DefaultCPUAllocator: can't allocate memory: you tried to allocate 140737488355328 bytes"),
            "{m}"
        );
        assert_eq!(
            diagnose::failures::classify(&m),
            common::wire::failure::Class::OutOfMemory
        );
        // After it, tch works as before and panics outside `catch` still panic.
        assert_eq!(
            catch(|| Ok(Tensor::from(2.0).double_value(&[]))).unwrap(),
            2.0
        );
        assert!(
            panic::catch_unwind(|| Tensor::empty([IMPOSSIBLE], (Kind::Float, Device::Cpu)))
                .is_err()
        );
    }

    #[test]
    fn other_panics_keep_their_message_and_place_and_errors_pass_through() {
        let r: Result<(), _> = catch(|| panic!("index {} out of range", 7));
        let Err(TchError::Torch(m)) = r else {
            panic!("{r:?}")
        };
        assert!(m.starts_with("panic at "), "{m}");
        assert!(
            m.contains("panics.rs") && m.ends_with("index 7 out of range"),
            "{m}"
        );
        let r: Result<(), _> = catch(|| Err(TchError::Shape("as returned".into())));
        assert!(matches!(r, Err(TchError::Shape(s)) if s == "as returned"));
    }

    #[test]
    fn debug_escapes_are_undone() {
        let text = r#"called `Result::unwrap()` on an `Err` value: Torch("line \"one\"\nline two\\ \u{1b}")"#;
        assert_eq!(
            libtorch_text(text).unwrap(),
            "line \"one\"\nline two\\ \\u{1b}"
        );
        assert_eq!(libtorch_text("no tch error here"), None);
    }
}
