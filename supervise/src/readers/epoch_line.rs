//! The seeds' epoch lines, and `train`'s own (tools/train's console
//! listener): `Epoch 2/50 | Train Loss: 3.8234 | Val Loss: 1.2103 | LR:
//! 0.000001 | Time: 95.32s`, seed 000's `Epoch 1/50 | Loss: 4.12 | Time: 140s`,
//! and train's extra fields (`| R²: 0.9120 | Acc: 0.8125`). `Epoch N` (with or
//! without `/TOTAL`) then `|`-separated `Label: value` fields; text after a
//! value (a unit, a remark) is ignored. The capital `Epoch` is the seeds':
//! pytorch/examples' `| end of epoch   1 | time: ...` is left to a regex.

use super::{number, Found};

/// A field's label (lower case) and the metric it reports; any other label
/// is reported under its snake_case form (`Val Acc` is `val_acc`).
const LABELS: &[(&str, &str)] = &[
    ("loss", "train_loss"),
    ("train loss", "train_loss"),
    ("training loss", "train_loss"),
    ("val loss", "val_loss"),
    ("valid loss", "val_loss"),
    ("validation loss", "val_loss"),
    ("lr", "lr"),
    ("time", "seconds"),
    ("r²", "r2"),
    ("r2", "r2"),
    ("acc", "accuracy"),
    ("accuracy", "accuracy"),
    ("mae", "mae"),
    ("rmse", "rmse"),
    ("f1", "macro_f1"),
    ("macro f1", "macro_f1"),
];

pub(super) fn read(text: &str) -> Option<Found> {
    let (epoch, fields) = after_epoch(text)?;
    let values: Vec<(String, f64)> = fields.split('|').filter_map(field).collect();
    if values.is_empty() {
        return None;
    }
    Some(Found {
        values,
        at: Some(epoch),
        epoch: Some(epoch),
        dict: false,
    })
}

/// The epoch of `Epoch N[/TOTAL] |` (at a word's start anywhere in the
/// line, so a logger's prefix is fine) and the text after its `|`.
fn after_epoch(text: &str) -> Option<(f64, &str)> {
    let mut from = 0;
    while let Some(at) = text[from..].find("Epoch") {
        let start = from + at;
        from = start + "Epoch".len();
        let word_start = text[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        if !word_start {
            continue;
        }
        if let Some(found) = epoch_and_fields(&text[from..]) {
            return Some(found);
        }
    }
    None
}

/// ` 2/50 | rest` -> (2, " rest").
fn epoch_and_fields(s: &str) -> Option<(f64, &str)> {
    let s = s.strip_prefix(char::is_whitespace)?.trim_start();
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let epoch: u64 = s[..digits].parse().ok()?;
    let mut rest = s[digits..].trim_start();
    if let Some(total) = rest.strip_prefix('/') {
        let total = total.trim_start();
        let n = total.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        rest = total[n..].trim_start();
    }
    let fields = rest.strip_prefix('|')?;
    Some((epoch as f64, fields))
}

/// `Label: value[unit][ remark]` -> (metric, value).
fn field(f: &str) -> Option<(String, f64)> {
    let (label, value) = f.split_once(':')?;
    let label = label.trim();
    let (v, after) = number::leading(value.trim_start())?;
    // A unit (`s`, `%`) may follow the number, then a space or the end:
    // `1:23:45` is a clock, not 1.
    let unit = after
        .chars()
        .take_while(|c| c.is_alphabetic() || *c == '%')
        .map(char::len_utf8)
        .sum::<usize>();
    if !after[unit..].is_empty() && !after[unit..].starts_with(char::is_whitespace) {
        return None;
    }
    Some((name_of(label)?, v))
}

fn name_of(label: &str) -> Option<String> {
    let lower = label.to_lowercase();
    if let Some((_, name)) = LABELS.iter().find(|(l, _)| *l == lower) {
        return Some(name.to_string());
    }
    let mut name = String::new();
    for c in lower.chars() {
        if c.is_alphanumeric() {
            name.push(c);
        } else if !name.is_empty() && !name.ends_with('_') {
            name.push('_');
        }
    }
    let name = name.trim_end_matches('_');
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line's epoch and (name, value) pairs.
    type Read = Option<(Option<f64>, Vec<(String, f64)>)>;

    fn values(line: &str) -> Read {
        read(line).map(|f| (f.epoch, f.values))
    }

    fn pairs(p: &[(&str, f64)]) -> Vec<(String, f64)> {
        p.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn the_seeds_lines() {
        // /work/shared/seeds/001: the supervisor's log after the fix.
        assert_eq!(
            values(
                "Epoch 2/50 | Train Loss: 3.8234 | Val Loss: 1.2103 | LR: 0.000001 | Time: 95.32s"
            ),
            Some((
                Some(2.0),
                pairs(&[
                    ("train_loss", 3.8234),
                    ("val_loss", 1.2103),
                    ("lr", 0.000001),
                    ("seconds", 95.32)
                ])
            ))
        );
        // Seed 000, remarks and all.
        assert_eq!(
            values("Epoch 2/50 | Loss: 3.82 | Time: 95s   ✅ NO ERROR"),
            Some((Some(2.0), pairs(&[("train_loss", 3.82), ("seconds", 95.0)])))
        );
        assert_eq!(
            values("Epoch 1/50 | Loss: 4.12 | Time: 140s  (compilation)"),
            Some((
                Some(1.0),
                pairs(&[("train_loss", 4.12), ("seconds", 140.0)])
            ))
        );
    }

    #[test]
    fn trains_own_lines_with_their_extra_fields() {
        // A real run of train on configs/demo_cpu.yaml (a regression task
        // prints R², a classification task Acc).
        assert_eq!(
            values("Epoch 3/8 | Train Loss: 0.1656 | Val Loss: 0.1043 | LR: 0.001634 | Time: 4.42s | R²: 0.9053"),
            Some((
                Some(3.0),
                pairs(&[
                    ("train_loss", 0.1656),
                    ("val_loss", 0.1043),
                    ("lr", 0.001634),
                    ("seconds", 4.42),
                    ("r2", 0.9053)
                ])
            ))
        );
        assert!(values("New best model saved! (val_loss: 0.1543)").is_none());
        let (_, v) = values("Epoch 1/2 | Train Loss: NaN | Val Loss: inf | LR: 0.000100 | Time: 1.00s | Acc: 0.8125").unwrap();
        assert_eq!(v[0].0, "train_loss");
        assert!(v[0].1.is_nan());
        assert_eq!(v[1], ("val_loss".into(), f64::INFINITY));
        assert_eq!(v[4], ("accuracy".into(), 0.8125));
    }

    #[test]
    fn kin_of_the_seeds_lines() {
        assert_eq!(
            values("2024-05-01 10:00:00 INFO Epoch 7 | Val Acc: 91.5% | MAE: 0.2"),
            Some((Some(7.0), pairs(&[("val_acc", 91.5), ("mae", 0.2)])))
        );
        // A field that is not `Label: number` is skipped, the rest kept.
        assert_eq!(
            values("Epoch 4/9 | Loss: 0.5 | Time: 1:02:03 | note: fine | Macro F1: 0.7"),
            Some((Some(4.0), pairs(&[("train_loss", 0.5), ("macro_f1", 0.7)])))
        );
    }

    #[test]
    fn lines_that_are_not_epoch_reports() {
        for line in [
            "",
            "Epoch 1: Compile/warm-up (may be slow)",
            "| **50 Epochs Time** | ~2.4 hours | ~3.0 hours |",
            "| end of epoch   1 | time: 47.57s | valid loss  5.86 | valid ppl   350.66",
            "Epoch 3 [=====>    ] 10/20 loss 0.5 (00:03)",
            "Epoch 2/50 | Loss: high",
            "Epoch /50 | Loss: 1",
            "Epoch 2/ | Loss: 1",
            "Epoch 99999999999999999999999 | Loss: 1",
            "MyEpoch 2 | Loss: 1",
            "✅ **Epoch 2+ complete successfully**",
        ] {
            assert!(values(line).is_none(), "{line}");
        }
    }
}
