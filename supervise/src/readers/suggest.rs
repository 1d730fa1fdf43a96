//! The `--metric-regex` to suggest when no reader read a program's output:
//! made from a line of that output that holds a metric's label and its
//! number (`epoch 1: val loss: 1.000` gives `val loss:? *([0-9.]+)`), and
//! suggested only when the reader that will use it reads that number back
//! from that line. Pure: lines in, a suggestion (or none) out.

use super::{number, visible, Reader};

/// A regex shown to the user, with the line it was made from and tested on.
#[derive(Clone, Debug, PartialEq)]
pub struct Suggestion {
    /// `--metric`'s name: the one given, else the label in snake_case.
    pub metric: String,
    pub regex: String,
    /// The line, as a terminal shows it.
    pub line: String,
    /// The number the regex reads from it.
    pub value: f64,
}

/// Words of a label that say it is a result worth ranking by; the label
/// must hold one (`time 47.57s` and `batch 32` are not).
const RESULT_WORDS: &[&str] = &[
    "loss",
    "acc",
    "accuracy",
    "f1",
    "ppl",
    "perplexity",
    "mae",
    "rmse",
    "mse",
    "error",
    "bleu",
    "score",
    "r2",
];
/// Words that make a label an evaluation's, preferred.
const EVAL_WORDS: &[&str] = &["val", "valid", "validation", "eval", "dev"];

/// The longest label taken, in words.
const MAX_WORDS: usize = 3;

/// The best regex for `metric` (or for the likeliest validation metric,
/// when None) over `lines`, the latest line first among equals; None when
/// no line holds a label with a number that a regex reads back.
pub fn regex_for(lines: &[String], metric: Option<&str>) -> Option<Suggestion> {
    let mut best: Option<(u8, Suggestion)> = None;
    for line in lines.iter().rev() {
        let text = visible(line);
        for (label, sep, number) in labels(&text) {
            let score = score(&label, metric);
            if score == 0 || best.as_ref().is_some_and(|(s, _)| *s >= score) {
                continue;
            }
            if let Some(s) = tested(&text, &label, sep, number, metric) {
                best = Some((score, s));
            }
        }
    }
    best.map(|(_, s)| s)
}

/// How well `label` fits: 0 not at all; the metric named when given, else
/// an evaluation's loss, then any evaluation's result, then any result.
fn score(label: &str, metric: Option<&str>) -> u8 {
    let words: Vec<&str> = label.split([' ', '_', '/']).collect();
    let has = |set: &[&str]| {
        words
            .iter()
            .any(|w| set.contains(&w.to_lowercase().as_str()))
    };
    if let Some(m) = metric {
        return if snake(label) == m.to_lowercase() {
            9
        } else {
            0
        };
    }
    match (has(EVAL_WORDS), has(&["loss"]), has(RESULT_WORDS)) {
        (true, true, _) => 4,
        (true, false, true) => 3,
        (false, true, _) => 2,
        (false, false, true) => 1,
        _ => 0,
    }
}

/// `val loss` -> `val_loss`.
fn snake(label: &str) -> String {
    let mut s = String::new();
    for c in label.to_lowercase().chars() {
        if c.is_alphanumeric() || c == '/' {
            s.push(c);
        } else if !s.ends_with('_') {
            s.push('_');
        }
    }
    s.trim_matches('_').to_string()
}

/// Each (label, separator, number's text) of a line: a number that starts a
/// word, after a run of up to [`MAX_WORDS`] words holding a letter (`valid
/// loss  5.86`, `top1 acc=0.4`), with only spaces, `:` or `=` between.
fn labels(text: &str) -> Vec<(String, &str, &str)> {
    let mut found = Vec::new();
    for (at, _) in text.char_indices() {
        let before = &text[..at];
        if before
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '.' || c == '-')
        {
            continue;
        }
        let Some((_, after)) = number::leading(&text[at..]) else {
            continue;
        };
        let number = &text[at..text.len() - after.len()];
        let head = before.trim_end_matches([' ', '\t', ':', '=']);
        let sep = &before[head.len()..];
        if sep.is_empty() {
            continue;
        }
        let mut words: Vec<&str> = Vec::new();
        let mut rest = head;
        while words.len() < MAX_WORDS {
            let word = rest
                .rsplit(|c: char| !(c.is_alphanumeric() || c == '_' || c == '/'))
                .next()
                .unwrap_or("");
            if word.is_empty() || !word.chars().any(char::is_alphabetic) {
                break;
            }
            words.push(word);
            rest = &rest[..rest.len() - word.len()];
            match rest.strip_suffix(' ') {
                Some(r) if r.ends_with(|c: char| c.is_alphanumeric()) => rest = r,
                _ => break,
            }
        }
        if words.is_empty() {
            continue;
        }
        words.reverse();
        found.push((words.join(" "), sep, number));
    }
    found
}

/// The suggestion for `label` if its regex, compiled as `train run` and
/// verify-fixes compile it, reads `number` back from `line`.
fn tested(
    line: &str,
    label: &str,
    sep: &str,
    number: &str,
    metric: Option<&str>,
) -> Option<Suggestion> {
    let value = number::whole(number).filter(|v| v.is_finite())?;
    let sep = if sep.contains('=') {
        r" *= *"
    } else if sep.contains('\t') {
        r"[:\s]*"
    } else {
        ":? *"
    };
    let group = if number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        "([0-9.]+)"
    } else {
        "([-+0-9.eE]+)"
    };
    let regex = format!("{}{sep}{group}", regex::escape(label));
    let metric = metric.map_or_else(|| snake(label), str::to_string);
    let mut reader = Reader::new(&metric, Some(&regex)).ok()?;
    let read = reader.line(line);
    let back = read.iter().find(|r| r.metric.as_str() == metric)?;
    (back.value == value && !regex.contains('\'')).then(|| Suggestion {
        metric,
        regex,
        line: line.to_string(),
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(String::from).collect()
    }

    fn suggest(text: &str, metric: Option<&str>) -> Option<(String, String, f64)> {
        regex_for(&lines(text), metric).map(|s| (s.metric, s.regex, s.value))
    }

    #[test]
    fn a_regex_is_made_from_the_line_and_reads_it_back() {
        for (text, metric, want) in [
            (
                "loading...\nepoch 1: val loss: 1.000\nepoch 2: val loss: 0.500",
                None,
                ("val_loss", "val loss:? *([0-9.]+)", 0.5),
            ),
            (
                "| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 14.31 | loss  7.63 | ppl  2050.85\n\
                 | end of epoch   1 | time: 47.57s | valid loss  5.86 | valid ppl   350.66",
                None,
                ("valid_loss", "valid loss:? *([0-9.]+)", 5.86),
            ),
            (
                "it 10 Dev-Score = 7.5e-01",
                None,
                ("score", "Score *= *([-+0-9.eE]+)", 0.75),
            ),
            (
                "top1 accuracy\t91.25 | wer 0.2",
                Some("top1_accuracy"),
                ("top1_accuracy", "top1 accuracy[:\\s]*([0-9.]+)", 91.25),
            ),
            (
                "bleu: 27.1 | meteor: 0.3",
                Some("bleu"),
                ("bleu", "bleu:? *([0-9.]+)", 27.1),
            ),
        ] {
            let got = suggest(text, metric).unwrap_or_else(|| panic!("none for {text}"));
            assert_eq!(got, (want.0.into(), want.1.into(), want.2), "{text}");
        }
    }

    #[test]
    fn no_regex_without_a_result_to_read() {
        for (text, metric) in [
            ("", None),
            ("loading the data...\nbatch 32 | lr 0.001 | time 4.5s", None),
            ("val loss: nan", None),
            ("val loss: 0.4", Some("accuracy")),
            ("Traceback (most recent call last):", None),
        ] {
            assert_eq!(suggest(text, metric), None, "{text}");
        }
    }
}
