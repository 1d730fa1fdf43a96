//! One mapping per line: a JSON object (`{"epoch": 3, "val_loss": 0.12}`) or
//! the Python dict Hugging Face's Trainer prints with `str(logs)`
//! (transformers' trainer_callback.py, `ProgressCallback.on_log` and
//! `PrinterCallback.on_log`): `{'loss': 0.6925, 'grad_norm': 1.52,
//! 'learning_rate': 4.5e-05, 'epoch': 0.5}`. Python's literals are read
//! (single or double quotes, True/False/None, nan/inf), numbers written as
//! strings (`'eval_loss': '9.86'`, as newer transformers print), and a
//! number wrapped in a call (`np.float64(0.85)`, `tensor(1.2, device='cuda:0')`,
//! what numpy 2 and torch scalars print as). Values that are not numbers
//! (strings, lists, nested dicts, booleans) are skipped.

use super::{number, Found, STEP_KEYS};

/// Nesting past this is not a metrics line (and would cost stack).
const MAX_DEPTH: usize = 32;

pub(super) fn read(text: &str) -> Option<Found> {
    let text = text.trim();
    if !text.starts_with('{') {
        return None;
    }
    let mut p = Parser { s: text, at: 0 };
    let Value::Map(entries) = p.value(0)? else {
        return None;
    };
    p.space();
    if p.at != text.len() {
        return None;
    }
    let value_of = |k: &str| {
        entries.iter().find_map(|(key, v)| match v {
            Value::Num(n) if key == k => Some(*n),
            _ => None,
        })
    };
    let at = STEP_KEYS.iter().find_map(|k| value_of(k));
    let epoch = value_of("epoch");
    let values: Vec<(String, f64)> = entries
        .into_iter()
        .filter(|(k, _)| !STEP_KEYS.contains(&k.as_str()))
        .filter_map(|(k, v)| match v {
            Value::Num(n) => Some((k, n)),
            _ => None,
        })
        .collect();
    Some(Found {
        values,
        at,
        epoch,
        dict: true,
    })
}

enum Value {
    Num(f64),
    Str(String),
    Map(Vec<(String, Value)>),
    /// A list, a boolean, None, a call of something else: nothing to report.
    Other,
}

struct Parser<'a> {
    s: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.s[self.at..]
    }

    fn space(&mut self) {
        let r = self.rest();
        self.at += r.len() - r.trim_start().len();
    }

    fn eat(&mut self, c: char) -> bool {
        self.space();
        if self.rest().starts_with(c) {
            self.at += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.space();
        let c = self.rest().chars().next()?;
        match c {
            '{' => self.map(depth),
            '[' | '(' => self.seq(if c == '[' { ']' } else { ')' }, depth),
            '\'' | '"' => {
                let s = self.string()?;
                Some(number::whole(&s).map_or(Value::Str(s), Value::Num))
            }
            _ => {
                if let Some((n, after)) = number::leading(self.rest()) {
                    self.at = self.s.len() - after.len();
                    return Some(Value::Num(n));
                }
                self.name_or_call(depth)
            }
        }
    }

    /// `{key: value, ...}`, a trailing comma allowed.
    fn map(&mut self, depth: usize) -> Option<Value> {
        self.eat('{');
        let mut entries = Vec::new();
        loop {
            if self.eat('}') {
                return Some(Value::Map(entries));
            }
            let key = match self.value(depth + 1)? {
                Value::Str(s) => s,
                // A number key (`{1: 0.5}`) as Python would print it back.
                Value::Num(n) => n.to_string(),
                _ => return None,
            };
            if !self.eat(':') {
                return None;
            }
            let value = self.value(depth + 1)?;
            entries.push((key, value));
            if !self.eat(',') {
                return self.eat('}').then_some(Value::Map(entries));
            }
        }
    }

    /// `[a, b]` or `(a, b)`: read through, reported as nothing.
    fn seq(&mut self, close: char, depth: usize) -> Option<Value> {
        self.at += 1;
        loop {
            if self.eat(close) {
                return Some(Value::Other);
            }
            self.value(depth + 1)?;
            if !self.eat(',') {
                return self.eat(close).then_some(Value::Other);
            }
        }
    }

    /// A quoted string, Python's or JSON's; escapes kept loosely (only a
    /// key's or a number's text matters here).
    fn string(&mut self) -> Option<String> {
        let quote = self.rest().chars().next()?;
        self.at += 1;
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    let (_, e) = chars.next()?;
                    out.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        other => other,
                    });
                }
                c if c == quote => {
                    self.at += i + 1;
                    return Some(out);
                }
                c => out.push(c),
            }
        }
        None
    }

    /// `True`, `None`, `null`, or `name.attr(args)`: a call whose first
    /// argument is a number is that number (`np.float64(0.85)`).
    fn name_or_call(&mut self, depth: usize) -> Option<Value> {
        let r = self.rest();
        let len = r
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(r.len());
        if len == 0 {
            return None;
        }
        self.at += len;
        if !self.eat('(') {
            return Some(Value::Other);
        }
        let mut first = None;
        loop {
            if self.eat(')') {
                return Some(first.unwrap_or(Value::Other));
            }
            // A keyword argument: `device='cuda:0'`.
            let save = self.at;
            self.space();
            let r = self.rest();
            let name = r
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(r.len());
            self.at += name;
            if name == 0 || !self.eat('=') {
                self.at = save;
            }
            let v = self.value(depth + 1)?;
            if first.is_none() {
                first = Some(match v {
                    Value::Num(n) => Value::Num(n),
                    _ => Value::Other,
                });
            }
            if !self.eat(',') {
                return self.eat(')').then(|| first.unwrap_or(Value::Other));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line's epoch and (name, value) pairs.
    type Read = Option<(Option<f64>, Vec<(String, f64)>)>;

    fn read_pairs(line: &str) -> Read {
        read(line).map(|f| (f.at, f.values))
    }

    fn pairs(p: &[(&str, f64)]) -> Vec<(String, f64)> {
        p.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn json_lines() {
        assert_eq!(
            read_pairs(r#"{"epoch": 3, "val_loss": 0.12}"#),
            Some((Some(3.0), pairs(&[("val_loss", 0.12)])))
        );
        assert_eq!(
            read_pairs(
                r#"{"step":200,"loss":1.5e-3,"name":"run \"a\"","ok":true,"h":[1,2],"n":null,"d":{"x":1}}"#
            ),
            Some((Some(200.0), pairs(&[("loss", 0.0015)])))
        );
        let (_, v) = read_pairs(r#"{"loss": NaN, "acc": Infinity}"#).unwrap();
        assert!(v[0].1.is_nan());
        assert_eq!(v[1].1, f64::INFINITY);
    }

    #[test]
    fn hugging_face_trainer_lines() {
        // As transformers' ProgressCallback writes them (epoch rounded to 2
        // places; total_flos popped).
        assert_eq!(
            read_pairs(
                "{'loss': 0.6925, 'grad_norm': 1.5234, 'learning_rate': 4.5e-05, 'epoch': 0.33}"
            ),
            Some((
                Some(0.33),
                pairs(&[
                    ("loss", 0.6925),
                    ("grad_norm", 1.5234),
                    ("learning_rate", 4.5e-05)
                ])
            ))
        );
        assert_eq!(
            read_pairs("{'eval_loss': 0.8636777400970459, 'eval_matthews_correlation': 0.3999158683209528, 'eval_runtime': 2.8435, 'eval_samples_per_second': 366.801, 'eval_steps_per_second': 36.926, 'epoch': 5.0}"),
            Some((
                Some(5.0),
                pairs(&[
                    ("eval_loss", 0.8636777400970459),
                    ("eval_matthews_correlation", 0.3999158683209528),
                    ("eval_runtime", 2.8435),
                    ("eval_samples_per_second", 366.801),
                    ("eval_steps_per_second", 36.926)
                ])
            ))
        );
        assert_eq!(
            read_pairs("{'train_runtime': 1032.1265, 'train_samples_per_second': 0.265, 'train_steps_per_second': 0.033, 'train_loss': 3.466222196817398, 'epoch': 0.01}"),
            Some((
                Some(0.01),
                pairs(&[
                    ("train_runtime", 1032.1265),
                    ("train_samples_per_second", 0.265),
                    ("train_steps_per_second", 0.033),
                    ("train_loss", 3.466222196817398)
                ])
            ))
        );
        // Newer transformers print values as strings.
        assert_eq!(
            read_pairs("{'loss': '19.79', 'grad_norm': '0.09695', 'learning_rate': '0.0001803', 'epoch': '1.176'}"),
            Some((
                Some(1.176),
                pairs(&[("loss", 19.79), ("grad_norm", 0.09695), ("learning_rate", 0.0001803)])
            ))
        );
    }

    #[test]
    fn python_literals_and_scalar_wrappers() {
        let (epoch, v) = read_pairs(
            "{'loss': nan, 'acc': np.float64(0.85), 'gn': tensor(1.25, device='cuda:0'), 'neg': -inf, 'flag': True, 'none': None, 'tag': 'x', 'lst': [1, (2, 3)], 'epoch': 1.0,}",
        )
        .unwrap();
        assert_eq!(epoch, Some(1.0));
        assert_eq!(v.len(), 4);
        assert!(v[0].1.is_nan());
        assert_eq!(
            v[1..],
            pairs(&[("acc", 0.85), ("gn", 1.25), ("neg", f64::NEG_INFINITY)])
        );
    }

    #[test]
    fn lines_that_are_not_mappings() {
        for line in [
            "",
            "{",
            "{}x",
            "{'a': 1",
            "{'a' 1}",
            "{'a': 1,, 'b': 2}",
            "{[1]: 2}",
            "[1, 2]",
            "loss {'a': 1}",
            "{'a': np.float64(0.5}",
            "{'a': 'unterminated}",
            "{'a': f()()}",
        ] {
            assert!(read(line).is_none_or(|f| f.values.is_empty()), "{line}");
        }
        assert!(read("{}").is_some_and(|f| f.values.is_empty()));
        let deep = "{'a': ".to_string() + &"[".repeat(10_000);
        assert!(read(&deep).is_none());
    }
}
