//! The fix ladder: after a failed attempt, the knobs to turn for the next
//! one, from the failure's class and the knobs as they stand. Stateless:
//! each attempt's knobs are read again from its own command and config, so
//! a rung already climbed (checkpointing on) is passed by itself. Pure.
//!
//! - CUDA-graph replay errors: compile mode `default`, checkpointing kept.
//! - Out of memory (and fragmentation, whose allocator setting the
//!   supervisor already sets): checkpointing on; then half the batch with
//!   twice the accumulation, so batch x accumulation stays what was asked,
//!   down to batch 1; then mixed precision where the device has it. Never
//!   a smaller effective batch. The ladder stops where halving cannot help
//!   (`halving_cannot_help`): the same allocation failed again at half the
//!   batch, before any step or with no less memory allocated.
//! - A non-finite loss under fp16: bf16 where the device has it.
//! - Anything else: no fix.

use crate::keys::Scalar;
use crate::knobs::{Found, Knob, Turn};
use common::wire::config::CompileMode;
use common::wire::failure::Class;

/// Attempts at most by default (`train run --max-attempts`, a sweep's
/// `max_attempts`): the first and up to four fixes (checkpointing on, then
/// the batch halved up to three times).
pub const MAX_ATTEMPTS: u32 = 5;

/// What mixed precision the device the command runs on supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// No GPU: mixed precision is not a memory fix here.
    Cpu,
    /// A GPU; bf16 from compute capability 8.0 (Ampere) on.
    Gpu { bf16: bool },
}

/// The next attempt's turns, and the rungs that could not be climbed, in
/// words. No turns: no fix.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub turns: Vec<Turn>,
    pub not_possible: Vec<String>,
    /// Why the ladder ends here though a rung is left, in words.
    pub stopped: Option<String>,
}

/// One attempt's out-of-memory failure, as the halving rule reads it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OomSeen {
    /// The batch it ran at; None when not known.
    pub batch: Option<i64>,
    /// The allocation that failed, MiB, as the message printed it.
    pub tried_mib: Option<f64>,
    /// What PyTorch had allocated then, MiB (a CUDA message says it).
    pub allocated_mib: Option<f64>,
    /// The metric or step lines it printed before it failed.
    pub reports: u64,
}

/// The next attempt's plan after a failure of `class` (`fragmented`: an
/// out-of-memory with more reserved-but-unallocated memory than it asked
/// for), with the knobs found as they stand; `seen`: the run's
/// out-of-memory failures so far, this one last.
pub fn next(
    class: Class,
    fragmented: bool,
    knobs: &[Found],
    device: Device,
    seen: &[OomSeen],
) -> Plan {
    let mut plan = Plan::default();
    match class {
        Class::CudaGraphPointer => compile_default(knobs, &mut plan),
        Class::OutOfMemory => out_of_memory(fragmented, knobs, device, seen, &mut plan),
        Class::NonFiniteLoss => non_finite(knobs, device, &mut plan),
        other => plan.not_possible.push(format!(
            "no knob fixes a failure of class {}",
            other.as_str()
        )),
    }
    plan
}

fn find(knobs: &[Found], knob: Knob) -> Option<&Found> {
    knobs.iter().find(|f| f.knob == knob)
}

/// `--knob NAME=...` in words, for a knob that was not found.
fn not_found(knob: Knob, what: &str) -> String {
    format!(
        "{what}: no {} knob was found (a flag the program defines, or a key of its config); name yours with --knob {}=NAME (fix: {{{}: NAME}} in a sweep)",
        knob.as_str().replace('_', " "),
        knob.as_str(),
        knob.as_str()
    )
}

fn compile_default(knobs: &[Found], plan: &mut Plan) {
    let Some(mode) = find(knobs, Knob::CompileMode) else {
        plan.not_possible
            .push(not_found(Knob::CompileMode, "compile mode `default`"));
        return;
    };
    let graphs = match &mode.value {
        Some(Scalar::Str(s)) => serde_yaml::from_str::<CompileMode>(s)
            .map(CompileMode::uses_cuda_graphs)
            .unwrap_or(true),
        _ => true,
    };
    if !graphs {
        plan.not_possible.push(format!(
            "compile mode is already one without CUDA graphs ({})",
            mode.place
        ));
        return;
    }
    plan.turns.push(Turn {
        knob: Knob::CompileMode,
        value: Scalar::Str("default".into()),
        why: "CUDA graphs replayed over tensors that moved (torch.compile's reduce-overhead with gradient checkpointing); mode `default` compiles without them, checkpointing kept".into(),
    });
}

fn out_of_memory(
    fragmented: bool,
    knobs: &[Found],
    device: Device,
    seen: &[OomSeen],
    plan: &mut Plan,
) {
    let cause = if fragmented {
        "out of memory with enough memory reserved but unallocated (fragmentation; the allocator's expandable segments are set already)"
    } else {
        "out of memory"
    };
    match find(knobs, Knob::Checkpointing) {
        Some(f) if f.value != Some(Scalar::Bool(true)) => {
            plan.turns.push(Turn {
                knob: Knob::Checkpointing,
                value: Scalar::Bool(true),
                why: format!("{cause}: gradient checkpointing keeps fewer activations, recomputing them in the backward pass"),
            });
            return;
        }
        Some(_) => {}
        None => plan
            .not_possible
            .push(not_found(Knob::Checkpointing, "gradient checkpointing")),
    }
    // Mixed precision halves activations too: where the batch is not what
    // runs out, neither rung helps.
    if let Some(why) = halving_cannot_help(seen) {
        plan.stopped = Some(why);
        return;
    }
    if smaller_batch(cause, knobs, plan) {
        return;
    }
    mixed_precision(cause, knobs, device, plan);
}

/// Half the batch (its smallest factor, for an odd one) with that much
/// more accumulation. False when not possible (said in the plan).
fn smaller_batch(cause: &str, knobs: &[Found], plan: &mut Plan) -> bool {
    let Some(batch) = find(knobs, Knob::Batch) else {
        plan.not_possible
            .push(not_found(Knob::Batch, "a smaller batch"));
        return false;
    };
    let Some(Scalar::Int(b)) = batch.value else {
        plan.not_possible.push(format!(
            "a smaller batch: the batch size at {} is not known",
            batch.place
        ));
        return false;
    };
    if b <= 1 {
        plan.not_possible.push(format!(
            "a smaller batch: the batch is 1 already ({})",
            batch.place
        ));
        return false;
    }
    let Some(accum) = find(knobs, Knob::Accumulation) else {
        plan.not_possible.push(not_found(
            Knob::Accumulation,
            "a smaller batch with more accumulation (a smaller batch alone would change the effective batch)",
        ));
        return false;
    };
    let a = match accum.value {
        Some(Scalar::Int(a)) if a >= 1 => a,
        _ => {
            plan.not_possible.push(format!(
                "a smaller batch: the gradient accumulation at {} is not known",
                accum.place
            ));
            return false;
        }
    };
    let f = smallest_factor(b);
    let (nb, na) = (b / f, a * f);
    let why = format!(
        "{cause}: batch {b} -> {nb} with accumulation {a} -> {na}, so batch x accumulation stays {}",
        b * a
    );
    plan.turns.push(Turn {
        knob: Knob::Batch,
        value: Scalar::Int(nb),
        why: why.clone(),
    });
    plan.turns.push(Turn {
        knob: Knob::Accumulation,
        value: Scalar::Int(na),
        why,
    });
    true
}

/// Why halving the batch cannot help, from the run's out-of-memory
/// failures (the last is the newest): the same allocation failed again
/// after the batch was made smaller, and that attempt made no step before
/// failing, or PyTorch's allocated memory did not drop. A model, its
/// gradients or optimizer state that do not fit fail so at every batch.
/// An allocation of the same size that a smaller batch leaves room for
/// (optimizer state after the activations) fails after steps, with less
/// allocated: halving goes on.
pub fn halving_cannot_help(seen: &[OomSeen]) -> Option<String> {
    let last = seen.last()?;
    let (tried, batch) = (last.tried_mib?, last.batch?);
    let before = seen[..seen.len() - 1]
        .iter()
        .rev()
        .find(|s| s.batch.is_some_and(|b| b > batch))?;
    if before.tried_mib != Some(tried) {
        return None;
    }
    let no_step = last.reports == 0;
    let not_lower = match (before.allocated_mib, last.allocated_mib) {
        (Some(a), Some(b)) => b >= a,
        _ => false,
    };
    if !no_step && !not_lower {
        return None;
    }
    // Each batch at which this allocation failed, largest first.
    let mut batches: Vec<i64> = Vec::new();
    for s in seen.iter().rev() {
        if s.tried_mib != Some(tried) {
            break;
        }
        if let Some(b) = s.batch.filter(|b| !batches.contains(b)) {
            batches.insert(0, b);
        }
    }
    let how = if no_step {
        "before any step".to_string()
    } else {
        format!(
            "PyTorch's allocated memory did not drop: {}, then {}",
            mib_words(before.allocated_mib.unwrap_or_default()),
            mib_words(last.allocated_mib.unwrap_or_default())
        )
    };
    Some(format!(
        "the same {} allocation failed at batch {} ({how}): the batch is not what runs out (the model, its gradients or its optimizer state do not fit: a smaller model, fewer trainable parameters, or more memory)",
        mib_words(tried),
        list_words(&batches)
    ))
}

/// 64 -> "64 MiB", 1536 -> "1.5 GiB".
fn mib_words(mib: f64) -> String {
    let (v, unit) = if mib >= 1024.0 {
        (mib / 1024.0, "GiB")
    } else {
        (mib, "MiB")
    };
    let text = format!("{v:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {unit}")
}

/// [64, 32, 16] -> "64, 32 and 16".
fn list_words(items: &[i64]) -> String {
    let words: Vec<String> = items.iter().map(i64::to_string).collect();
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => words.join(""),
    }
}

fn smallest_factor(n: i64) -> i64 {
    (2..=n).find(|d| n % d == 0).unwrap_or(n)
}

fn mixed_precision(cause: &str, knobs: &[Found], device: Device, plan: &mut Plan) {
    let Some(p) = find(knobs, Knob::Precision) else {
        plan.not_possible
            .push(not_found(Knob::Precision, "mixed precision"));
        return;
    };
    let now = match &p.value {
        Some(Scalar::Str(s)) => s.as_str(),
        _ => "no",
    };
    if now != "no" {
        plan.not_possible.push(format!(
            "mixed precision: {now} is on already ({})",
            p.place
        ));
        return;
    }
    let want = match device {
        Device::Cpu => {
            plan.not_possible
                .push("mixed precision: it saves GPU memory, and no GPU was found".into());
            return;
        }
        Device::Gpu { bf16: true } => "bf16",
        Device::Gpu { bf16: false } => "fp16",
    };
    plan.turns.push(Turn {
        knob: Knob::Precision,
        value: Scalar::Str(want.into()),
        why: format!("{cause}: {want} mixed precision halves the activations' memory"),
    });
}

fn non_finite(knobs: &[Found], device: Device, plan: &mut Plan) {
    let fp16 = find(knobs, Knob::Precision).filter(|p| p.value == Some(Scalar::Str("fp16".into())));
    match (fp16, device) {
        (None, _) => plan.not_possible.push(
            "a non-finite loss not under fp16: no knob fixes it (a lower learning rate or gradient clipping, in the code)".into(),
        ),
        (Some(_), Device::Gpu { bf16: true }) => plan.turns.push(Turn {
            knob: Knob::Precision,
            value: Scalar::Str("bf16".into()),
            why: "a non-finite loss under fp16 (its range overflows); bf16 has fp32's range".into(),
        }),
        (Some(p), _) => plan.not_possible.push(format!(
            "a non-finite loss under fp16 ({}): bf16 would fix it, and this device has no bf16",
            p.place
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knob(knob: Knob, value: Option<Scalar>) -> Found {
        Found {
            knob,
            place: format!("--{}", knob.as_str()),
            value,
        }
    }

    fn values(plan: &Plan) -> Vec<(Knob, Scalar)> {
        plan.turns
            .iter()
            .map(|t| (t.knob, t.value.clone()))
            .collect()
    }

    #[test]
    fn out_of_memory_climbs_checkpointing_then_batch_then_precision() {
        let gpu = Device::Gpu { bf16: true };
        let mut knobs = vec![
            knob(Knob::Checkpointing, Some(Scalar::Bool(false))),
            knob(Knob::Batch, Some(Scalar::Int(64))),
            knob(Knob::Accumulation, Some(Scalar::Int(1))),
            knob(Knob::Precision, None),
        ];
        let p = next(Class::OutOfMemory, false, &knobs, gpu, &[]);
        assert_eq!(values(&p), [(Knob::Checkpointing, Scalar::Bool(true))]);
        knobs[0].value = Some(Scalar::Bool(true));
        let p = next(Class::OutOfMemory, false, &knobs, gpu, &[]);
        assert_eq!(
            values(&p),
            [
                (Knob::Batch, Scalar::Int(32)),
                (Knob::Accumulation, Scalar::Int(2))
            ]
        );
        assert!(p.turns[0].why.contains("stays 64"), "{}", p.turns[0].why);
        knobs[1].value = Some(Scalar::Int(3));
        let p = next(Class::OutOfMemory, false, &knobs, gpu, &[]);
        assert_eq!(p.turns[0].value, Scalar::Int(1));
        assert_eq!(p.turns[1].value, Scalar::Int(3));
        knobs[1].value = Some(Scalar::Int(1));
        let p = next(Class::OutOfMemory, false, &knobs, gpu, &[]);
        assert_eq!(values(&p), [(Knob::Precision, Scalar::Str("bf16".into()))]);
        assert!(p.not_possible[0].contains("batch is 1 already"));
        // On the CPU, the last rung is not there: no fix, and why.
        let p = next(Class::OutOfMemory, false, &knobs, Device::Cpu, &[]);
        assert!(p.turns.is_empty());
        assert!(p.not_possible.iter().any(|w| w.contains("no GPU")));
    }

    #[test]
    fn a_batch_without_accumulation_is_never_made_smaller() {
        let knobs = vec![knob(Knob::Batch, Some(Scalar::Int(64)))];
        let p = next(Class::OutOfMemory, false, &knobs, Device::Cpu, &[]);
        assert!(p.turns.is_empty());
        let all = p.not_possible.join(" | ");
        assert!(all.contains("--knob accumulation=NAME"), "{all}");
        assert!(all.contains("--knob checkpointing=NAME"), "{all}");
    }

    #[test]
    fn cuda_graphs_get_mode_default_and_fp16_nan_gets_bf16() {
        let knobs = vec![
            knob(
                Knob::CompileMode,
                Some(Scalar::Str("reduce-overhead".into())),
            ),
            knob(Knob::Checkpointing, Some(Scalar::Bool(true))),
            knob(Knob::Precision, Some(Scalar::Str("fp16".into()))),
        ];
        let p = next(Class::CudaGraphPointer, false, &knobs, Device::Cpu, &[]);
        assert_eq!(
            values(&p),
            [(Knob::CompileMode, Scalar::Str("default".into()))]
        );
        let p = next(
            Class::CudaGraphPointer,
            false,
            &knobs[1..],
            Device::Cpu,
            &[],
        );
        assert!(p.turns.is_empty() && p.not_possible[0].contains("compile_mode=NAME"));
        let p = next(
            Class::NonFiniteLoss,
            false,
            &knobs,
            Device::Gpu { bf16: true },
            &[],
        );
        assert_eq!(values(&p), [(Knob::Precision, Scalar::Str("bf16".into()))]);
        let p = next(
            Class::NonFiniteLoss,
            false,
            &knobs,
            Device::Gpu { bf16: false },
            &[],
        );
        assert!(p.turns.is_empty() && p.not_possible[0].contains("no bf16"));
        let p = next(Class::Killed, false, &knobs, Device::Cpu, &[]);
        assert!(p.turns.is_empty() && p.not_possible[0].contains("killed"));
    }

    fn oom(batch: i64, tried_mib: f64, allocated_mib: Option<f64>, reports: u64) -> OomSeen {
        OomSeen {
            batch: Some(batch),
            tried_mib: Some(tried_mib),
            allocated_mib,
            reports,
        }
    }

    /// Checkpointing on, batch 32 with accumulation 2: the ladder's next
    /// rung would be batch 16.
    fn halved_once() -> Vec<Found> {
        vec![
            knob(Knob::Checkpointing, Some(Scalar::Bool(true))),
            knob(Knob::Batch, Some(Scalar::Int(32))),
            knob(Knob::Accumulation, Some(Scalar::Int(2))),
            knob(Knob::Precision, Some(Scalar::Str("no".into()))),
        ]
    }

    #[test]
    fn the_same_allocation_before_any_step_stops_the_halving() {
        let gpu = Device::Gpu { bf16: true };
        // The model's 64 MiB weight, at batch 64 (checkpointing off, then
        // on) and at 32: no step made.
        let seen = [
            oom(64, 64.0, None, 0),
            oom(64, 64.0, None, 0),
            oom(32, 64.0, None, 0),
        ];
        let p = next(Class::OutOfMemory, false, &halved_once(), gpu, &seen);
        assert!(p.turns.is_empty(), "{p:?}");
        let why = p.stopped.unwrap();
        assert!(
            why.starts_with("the same 64 MiB allocation failed at batch 64 and 32 (before any step): the batch is not what runs out"),
            "{why}"
        );
        // Three batches, said as a list.
        let mut more = seen.to_vec();
        more.push(oom(16, 64.0, None, 0));
        let why = halving_cannot_help(&more).unwrap();
        assert!(why.contains("failed at batch 64, 32 and 16"), "{why}");
        // One failure, or none at a smaller batch yet: no evidence.
        assert_eq!(halving_cannot_help(&seen[..1]), None);
        assert_eq!(halving_cannot_help(&seen[..2]), None);
        // A different allocation at half the batch: the batch mattered.
        let shrank = [oom(64, 128.0, None, 0), oom(32, 64.0, None, 0)];
        assert_eq!(halving_cannot_help(&shrank), None);
        let p = next(Class::OutOfMemory, false, &halved_once(), gpu, &shrank);
        assert_eq!(p.turns[0].value, Scalar::Int(16));
        // The size unknown (a MemoryError): nothing to compare.
        let unknown = [
            OomSeen {
                batch: Some(64),
                ..OomSeen::default()
            },
            OomSeen {
                batch: Some(32),
                ..OomSeen::default()
            },
        ];
        assert_eq!(halving_cannot_help(&unknown), None);
    }

    #[test]
    fn the_same_allocation_after_steps_with_less_allocated_keeps_halving() {
        let cpu = Device::Cpu;
        // Optimizer state allocated after the activations: the same 64
        // MiB at 64 and 32, each after a step was reported; on the CPU no
        // allocated figure, so the steps decide.
        let seen = [oom(64, 64.0, None, 1), oom(32, 64.0, None, 1)];
        assert_eq!(halving_cannot_help(&seen), None);
        let p = next(Class::OutOfMemory, false, &halved_once(), cpu, &seen);
        assert_eq!(
            values(&p),
            [
                (Knob::Batch, Scalar::Int(16)),
                (Knob::Accumulation, Scalar::Int(4))
            ]
        );
        // On a GPU, with less allocated at the smaller batch: on.
        let lower = [
            oom(64, 64.0, Some(30.0 * 1024.0), 3),
            oom(32, 64.0, Some(24.5 * 1024.0), 3),
        ];
        assert_eq!(halving_cannot_help(&lower), None);
        // The same allocated at half the batch, though it stepped: stop.
        let same = [
            oom(64, 2048.0, Some(73850.0), 3),
            oom(32, 2048.0, Some(73850.0), 3),
        ];
        let why = halving_cannot_help(&same).unwrap();
        assert!(
            why.starts_with("the same 2 GiB allocation failed at batch 64 and 32 (PyTorch's allocated memory did not drop: 72.12 GiB, then 72.12 GiB)"),
            "{why}"
        );
    }
}
