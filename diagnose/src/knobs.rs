//! The knobs a failed run's fix turns (`train run --auto-fix`, a sweep's
//! `auto_fix: true`): batch size, gradient accumulation, gradient
//! checkpointing, torch.compile's mode and mixed precision. Each place a
//! knob can be found (a config file's key, the program's own flag, a name
//! the user gave) says what it holds now as a [`Scalar`]; the ladder
//! (`ladder`) decides the next values from the failure's class.

use crate::keys::Scalar;

/// A setting the fix ladder turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Knob {
    /// Examples per forward/backward step (per device).
    Batch,
    /// Steps whose gradients are summed before one optimizer update.
    Accumulation,
    /// Gradient (activation) checkpointing, on or off.
    Checkpointing,
    /// torch.compile's mode (`default`, `reduce-overhead`, ...).
    CompileMode,
    /// Mixed precision: `no`, `fp16` or `bf16`.
    Precision,
}

impl Knob {
    pub const ALL: [Knob; 5] = [
        Knob::Batch,
        Knob::Accumulation,
        Knob::Checkpointing,
        Knob::CompileMode,
        Knob::Precision,
    ];

    /// Its name in `--knob NAME=...`, a space's `fix:` block and the files
    /// the tools write.
    pub fn as_str(self) -> &'static str {
        match self {
            Knob::Batch => "batch",
            Knob::Accumulation => "accumulation",
            Knob::Checkpointing => "checkpointing",
            Knob::CompileMode => "compile_mode",
            Knob::Precision => "precision",
        }
    }

    pub fn parse(s: &str) -> Result<Knob, String> {
        Knob::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown knob {s:?}; expected one of {}",
                    Knob::ALL.map(Knob::as_str).join(", ")
                )
            })
    }
}

/// A knob as one place holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub knob: Knob,
    /// Where, in words: `--per_device_train_batch_size`,
    /// `training.batch_size (line 4)`.
    pub place: String,
    /// Its value now (the flag's, the key's, or the program's default as its
    /// `--help` shows it); None when not known.
    pub value: Option<Scalar>,
}

/// A knob's new value, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    pub knob: Knob,
    pub value: Scalar,
    pub why: String,
}

/// `--knob batch=bsz`: the user's own name for a knob (a flag's name
/// without its dashes, or a config key).
pub fn parse_user_knob(s: &str) -> Result<(Knob, String), String> {
    let (k, name) = s
        .split_once('=')
        .ok_or_else(|| format!("expected KNOB=NAME (e.g. batch=bsz), found {s:?}"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("{s:?}: the name after `=` is empty"));
    }
    Ok((Knob::parse(k.trim())?, name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_read_back_by_name() {
        for k in Knob::ALL {
            assert_eq!(Knob::parse(k.as_str()), Ok(k));
        }
        assert!(Knob::parse("bsz")
            .unwrap_err()
            .contains("batch, accumulation"));
        assert_eq!(
            parse_user_knob("batch=bsz"),
            Ok((Knob::Batch, "bsz".to_string()))
        );
        assert!(parse_user_knob("batch").is_err());
        assert!(parse_user_knob("batch=").is_err());
    }
}
