//! `name=value`, `name: value` and `name value` for the metric names the
//! reader knows, anywhere on a line, as plain PyTorch scripts print them:
//! `epoch 3: train_loss=0.51 val_loss=0.43`, `epoch 0 val_loss 2.2527`,
//! `val_loss: 0.43`, Keras' `- loss: 0.5 - val_loss: 0.43`, Lightning's
//! `Epoch 0: 100%|...| [..., val_loss=0.5]`. The epoch, else the step,
//! comes from the same line (`epoch 3:`, `Epoch 3/10`, `epoch=3`, `step
//! 120`). Only the names in `FOUND_METRICS` and [`MORE_NAMES`] are read: `lr=0.001` or `batch 32`
//! are settings, not results. A pair inside parentheses is a remark about a
//! report (`New best model saved! (val_loss: 0.1543)`), and one after
//! `best` a summary (`best val_loss: 0.40`): neither is a report.

use super::{number, Found};

/// The names read besides the validation losses a run is judged by
/// (`crate::leg::FOUND_METRICS`), lower case (the line may write them in
/// any case): train's metrics.csv columns (`common::wire::metric`), and the
/// usual training loss and accuracies.
const MORE_NAMES: &[&str] = &[
    "train_loss",
    "train/loss",
    "loss",
    "mae",
    "rmse",
    "r2",
    "accuracy",
    "macro_f1",
    "val_acc",
    "val_accuracy",
    "eval_accuracy",
];

/// The names a pair's epoch or step is read from, most preferred first.
const AT: [&str; 3] = ["epoch", "step", "global_step"];

pub(super) fn read(text: &str) -> Option<Found> {
    let lower = text.to_ascii_lowercase();
    // Most lines hold no number (nor `nan`, `inf`): nothing to look for.
    if !(lower.bytes().any(|b| b.is_ascii_digit())
        || lower.contains("nan")
        || lower.contains("inf"))
    {
        return None;
    }
    // Each name's first pair, in the line's order.
    let mut found: Vec<(usize, String, f64)> = crate::leg::FOUND_METRICS
        .iter()
        .chain(MORE_NAMES)
        .filter_map(|name| {
            let p = pairs(text, &lower, name).find(|p| p.plain)?;
            Some((p.at, name.to_string(), p.value))
        })
        .collect();
    found.sort_by_key(|f| f.0);
    let values: Vec<(String, f64)> = found.into_iter().map(|(_, n, v)| (n, v)).collect();
    if values.is_empty() {
        return None;
    }
    let of = |key: &str| pairs(text, &lower, key).next().map(|p| p.value);
    let epoch = of("epoch");
    Some(Found {
        values,
        at: epoch.or_else(|| AT[1..].iter().find_map(|k| of(k))),
        epoch,
        dict: false,
    })
}

/// One `name value` in a line.
struct Pair {
    /// Where its name starts: the line's order of its reports.
    at: usize,
    value: f64,
    /// Neither in parentheses nor after `best`.
    plain: bool,
}

/// Each `name[ =: ]value` of `name` in `text`: the name a whole word (not
/// the end of `best_val_loss`, not a flag `--loss`), then `=` or `:` or
/// spaces, then a number that ends there (its unit `%` allowed; `3/10`
/// gives 3; not `1:23`, not `0.5x`).
fn pairs<'a>(text: &'a str, lower: &str, name: &'a str) -> impl Iterator<Item = Pair> + 'a {
    let starts: Vec<usize> = lower.match_indices(name).map(|(i, _)| i).collect();
    starts.into_iter().filter_map(move |at| {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || "_/-.".contains(c)) {
            return None;
        }
        let after = &text[at + name.len()..];
        let rest = after.trim_start_matches([' ', '\t']);
        let spaced = rest.len() < after.len();
        let rest = match rest.strip_prefix(['=', ':']) {
            Some(r) => r.trim_start_matches([' ', '\t']),
            None if spaced => rest,
            None => return None,
        };
        let (value, end) = number::leading(rest)?;
        let end = end.strip_prefix('%').unwrap_or(end);
        let ends = end.is_empty()
            || end.starts_with(|c: char| c.is_whitespace() || ",;|)]}/".contains(c))
            || end == "."
            || end.starts_with(". ")
            || (end.starts_with(':') && AT.contains(&name));
        if !ends {
            return None;
        }
        // `valid loss 5.86` is not `loss`: a one-word name after a word is
        // part of a longer label.
        if !name.contains(['_', '/']) && word_before(&text[..at]).is_some() {
            return None;
        }
        let plain = !in_parentheses(&text[..at])
            && !word_before(&text[..at]).is_some_and(|w| w.eq_ignore_ascii_case("best"));
        Some(Pair { at, value, plain })
    })
}

/// Whether `before` leaves a parenthesis open.
fn in_parentheses(before: &str) -> bool {
    let mut depth = 0i32;
    for c in before.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = (depth - 1).max(0),
            _ => {}
        }
    }
    depth > 0
}

/// The word of letters just before, across spaces: `valid ` -> `valid`;
/// None after a number or punctuation (`epoch 3 `, `- `, `| `, `2ms `).
fn word_before(before: &str) -> Option<&str> {
    let trimmed = before.trim_end_matches([' ', '\t']);
    if trimmed.len() == before.len() {
        return None;
    }
    let word = trimmed.rsplit(|c: char| !c.is_alphabetic()).next()?;
    let ahead = trimmed[..trimmed.len() - word.len()].chars().next_back();
    (!word.is_empty() && !ahead.is_some_and(char::is_alphanumeric)).then_some(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line's step source, epoch and (name, value) pairs.
    type Read = Option<(Option<f64>, Option<f64>, Vec<(String, f64)>)>;

    fn values(line: &str) -> Read {
        read(line).map(|f| (f.at, f.epoch, f.values))
    }

    fn pairs(p: &[(&str, f64)]) -> Vec<(String, f64)> {
        p.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn the_three_forms_with_the_epoch_or_step_of_the_line() {
        let e = |n: f64| (Some(n), Some(n));
        for (line, (at, epoch), want) in [
            (
                "epoch 3: train_loss=0.51 val_loss=0.43",
                e(3.0),
                pairs(&[("train_loss", 0.51), ("val_loss", 0.43)]),
            ),
            ("epoch 0 val_loss 2.2527", e(0.0), pairs(&[("val_loss", 2.2527)])),
            ("val_loss: 0.43", (None, None), pairs(&[("val_loss", 0.43)])),
            (
                "Epoch 3/10 - loss: 0.5000 - accuracy: 91.5% - val_loss: 0.4300",
                e(3.0),
                pairs(&[("loss", 0.5), ("accuracy", 91.5), ("val_loss", 0.43)]),
            ),
            (
                "10/10 [==============================] - 0s 2ms/step - loss: 0.5000 - val_loss: 0.4300",
                (None, None),
                pairs(&[("loss", 0.5), ("val_loss", 0.43)]),
            ),
            (
                "Epoch 0: 100%|██████████| 10/10 [00:01<00:00, 7.50it/s, v_num=0, val_loss=0.512, train_loss=0.61]",
                e(0.0),
                pairs(&[("val_loss", 0.512), ("train_loss", 0.61)]),
            ),
            (
                "step 120 | loss 2.31 | eval/loss 2.40 | lr 0.0003",
                (Some(120.0), None),
                pairs(&[("loss", 2.31), ("eval/loss", 2.4)]),
            ),
            (
                "INFO 2024-05-01 10:00:00 [epoch=2, global_step=300] VAL_LOSS = 1e-3, MAE=0.2;",
                e(2.0),
                pairs(&[("val_loss", 0.001), ("mae", 0.2)]),
            ),
            (
                "epoch 1.5\tvalid_loss\t0.75.",
                e(1.5),
                pairs(&[("valid_loss", 0.75)]),
            ),
            ("val_loss=nan", (None, None), vec![("val_loss".into(), f64::NAN)]),
        ] {
            let got = values(line).unwrap_or_else(|| panic!("nothing read from {line}"));
            assert_eq!((got.0, got.1), (at, epoch), "{line}");
            let same = got.2.len() == want.len()
                && got.2.iter().zip(&want).all(|(g, w)| {
                    g.0 == w.0 && (g.1 == w.1 || (g.1.is_nan() && w.1.is_nan()))
                });
            assert!(same, "{line}: {:?}", got.2);
        }
    }

    #[test]
    fn settings_remarks_and_other_words_are_not_reports() {
        for line in [
            "",
            "lr=0.001 batch 32 warmup_steps: 100",
            "New best model saved! (val_loss: 0.1543)",
            "Best val_loss: 0.40 at epoch 7",
            "best_val_loss=0.40",
            "Namespace(lr=0.001, val_loss=0.5)",
            "python train.py --val_loss 0.5",
            "val_loss improved from 0.45000 to 0.43000, saving model to m.keras",
            "val_loss_ema=0.3 lossy 0.2 myloss=0.1 loss/val=0.2",
            "elapsed 1:23:45 loss 1:23",
            "loss 0.5x accuracy 12abc",
            "accuracy",
            "val_loss: high",
            "| end of epoch   1 | time: 47.57s | valid loss  5.86 | valid ppl   350.66",
            "Validation accuracy: 0.91, test loss 0.5",
        ] {
            assert!(values(line).is_none(), "{line}: {:?}", values(line));
        }
    }

    #[test]
    fn a_step_alone_is_not_a_report_and_a_remark_beside_a_report_is_left_out() {
        assert!(values("epoch 3: step 120").is_none());
        assert_eq!(
            values("epoch 4 val_loss=0.41 (best val_loss: 0.39)"),
            Some((Some(4.0), Some(4.0), pairs(&[("val_loss", 0.41)])))
        );
    }
}
