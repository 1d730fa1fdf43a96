//! `--fix` on a config cfgcheck did not define: each changed key's value
//! replaced where it stands. YAML through `yaml_edit` (comments, quoting and
//! order kept); JSON by replacing the value's bytes, every other byte of the
//! text left as it was. A key a config leaves out (`--auto-fix`'s knobs)
//! is added at the top level: a YAML line, or a JSON member before the top
//! object's closing brace.

use super::tree::{Syntax, Tree};
use crate::keys::{Found, KeyChange, Scalar};
use crate::yaml_edit;
use common::yaml_index::YamlIndex;

/// The value as the messages write it.
pub fn shown(v: &Scalar) -> String {
    match v {
        Scalar::Bool(b) => b.to_string(),
        Scalar::Int(n) => n.to_string(),
        Scalar::Str(s) => s.clone(),
        Scalar::Null => "null".into(),
        Scalar::Other => "?".into(),
    }
}

pub fn yaml_text(v: &Scalar) -> String {
    match v {
        Scalar::Str(s) => yaml_edit::scalar(s),
        v => shown(v),
    }
}

pub fn json_text(v: &Scalar) -> String {
    match v {
        Scalar::Str(s) => serde_json::Value::String(s.clone()).to_string(),
        v => shown(v),
    }
}

/// `text` with each change made; Err says why an edit cannot be made.
pub fn apply(text: &str, tree: &Tree, changes: &[KeyChange]) -> Result<String, String> {
    match tree.syntax {
        Syntax::Yaml => {
            let mut out = text.to_string();
            for c in changes {
                // Only a key that is there is changed: never a new one made
                // from a path whose key holds a `.`.
                if !YamlIndex::build(&out).nodes.contains_key(&c.path) {
                    return Err(format!("cannot find `{}` to change it", c.path));
                }
                out = yaml_edit::set(&out, &c.path, &yaml_text(&c.value))
                    .map_err(|e| format!("cannot change `{}` in place: {e}", c.path))?;
            }
            Ok(out)
        }
        Syntax::Json => {
            let mut spans = Vec::new();
            for c in changes {
                let span = tree
                    .entries
                    .get(c.entry)
                    .filter(|e| e.path == c.path)
                    .and_then(|e| e.span)
                    .ok_or_else(|| format!("cannot find `{}` to change it", c.path))?;
                spans.push((span, json_text(&c.value)));
            }
            // From the end, so that the earlier spans stay where they are.
            spans.sort_by_key(|((start, _), _)| std::cmp::Reverse(*start));
            let mut out = text.to_string();
            for ((start, end), value) in spans {
                out.replace_range(start..end, &value);
            }
            Ok(out)
        }
    }
}

/// `text` with the top-level key `key` added with `value` (`key` must not
/// be there: the caller checks). Err says why it cannot be added.
pub fn add(text: &str, syntax: Syntax, key: &str, value: &Scalar) -> Result<String, String> {
    match syntax {
        Syntax::Yaml => yaml_edit::set(text, key, &yaml_text(value))
            .map_err(|e| format!("cannot add `{key}`: {e}")),
        Syntax::Json => add_json(text, key, value),
    }
}

/// A member added as the top object's last: on a line of its own, indented
/// as the member before it, when the object spans lines; else after a `, `.
fn add_json(text: &str, key: &str, value: &Scalar) -> Result<String, String> {
    let body = text.trim_end();
    let close = body.strip_suffix('}').map(str::len).ok_or_else(|| {
        format!("cannot add `{key}`: the file does not end with the top object's `}}`")
    })?;
    let before = body[..close].trim_end();
    // Strict JSON: only an empty object has `{` right before its `}`.
    let empty = before.ends_with('{');
    let member = format!(
        "{}: {}",
        json_text(&Scalar::Str(key.into())),
        json_text(value)
    );
    let insert = if body[..close].contains('\n') {
        let last_line = before.rsplit('\n').next().unwrap_or("");
        let mut indent: String = last_line
            .chars()
            .take_while(|c| c.is_whitespace())
            .collect();
        if empty {
            indent = format!("{indent}  ");
        }
        format!("{}\n{indent}{member}", if empty { "" } else { "," })
    } else if empty {
        member
    } else {
        format!(", {member}")
    };
    let at = before.len();
    Ok(format!("{}{insert}{}", &text[..at], &text[at..]))
}

/// Whether the edited file reads back with each change's value.
pub fn took(changes: &[KeyChange], after: &Found) -> bool {
    changes.iter().all(|c| {
        after
            .hits
            .iter()
            .any(|h| h.entry == c.entry && h.path == c.path && h.value == c.value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::input::Input;

    /// A change of the first key of `path` in `tree` (the last one when
    /// `last`).
    fn change_in(tree: &Tree, path: &str, last: bool, value: Scalar) -> KeyChange {
        let mut at = tree
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.path == path);
        let entry = if last { at.next_back() } else { at.next() }.map_or(usize::MAX, |(i, _)| i);
        KeyChange {
            path: path.into(),
            line: 0,
            entry,
            value,
            why: String::new(),
        }
    }

    fn tree(name: &str, text: &str) -> Tree {
        Tree::read(&Input {
            name: name.into(),
            text: text.into(),
        })
        .unwrap()
    }

    #[test]
    fn json_edits_touch_only_the_values() {
        let text = "{\n  \"training\": {\"torch_compile_mode\":\"max-autotune\" ,\n   \"dataloader_num_workers\" : 4},\n  \"note\": \"max-autotune\"\n}";
        let t = tree("c.json", text);
        let changes = [
            change_in(&t, "training.dataloader_num_workers", false, Scalar::Int(0)),
            change_in(
                &t,
                "training.torch_compile_mode",
                false,
                Scalar::Str("default".into()),
            ),
        ];
        let out = apply(text, &t, &changes).unwrap();
        assert_eq!(
            out,
            "{\n  \"training\": {\"torch_compile_mode\":\"default\" ,\n   \"dataloader_num_workers\" : 0},\n  \"note\": \"max-autotune\"\n}"
        );
        // Two keys of one path: the one the rule found is the one changed.
        let text = "{\"a.b\": 1, \"a\": {\"b\": 2}}";
        let t = tree("c.json", text);
        let out = apply(text, &t, &[change_in(&t, "a.b", true, Scalar::Int(0))]).unwrap();
        assert_eq!(out, "{\"a.b\": 1, \"a\": {\"b\": 0}}");
    }

    #[test]
    fn yaml_edits_keep_comments_and_dotted_keys() {
        let text = "# opts\ntorch_compile_options: {triton.cudagraphs: true}  # graphs\ntraining:\n  torch_compile_mode: 'max-autotune'  # fast\n";
        let t = tree("c.yaml", text);
        let changes = [
            change_in(
                &t,
                "torch_compile_options.triton.cudagraphs",
                false,
                Scalar::Bool(false),
            ),
            change_in(
                &t,
                "training.torch_compile_mode",
                false,
                Scalar::Str("default".into()),
            ),
        ];
        let out = apply(text, &t, &changes).unwrap();
        assert_eq!(
            out,
            "# opts\ntorch_compile_options: {triton.cudagraphs: false}  # graphs\ntraining:\n  torch_compile_mode: 'default'  # fast\n"
        );
        let missing = [change_in(&t, "nowhere.x", false, Scalar::Int(0))];
        assert!(apply(text, &t, &missing).is_err());
    }

    #[test]
    fn json_members_are_added_before_the_closing_brace() {
        let add = |text: &str| add_json(text, "bf16", &Scalar::Bool(true)).unwrap();
        assert_eq!(
            add("{\n  \"a\": 1,\n  \"b\": {\"c\": 2}\n}\n"),
            "{\n  \"a\": 1,\n  \"b\": {\"c\": 2},\n  \"bf16\": true\n}\n"
        );
        assert_eq!(add("{\"a\": \"}\"}"), "{\"a\": \"}\", \"bf16\": true}");
        assert_eq!(add("{}"), "{\"bf16\": true}");
        assert_eq!(add("{\n}"), "{\n  \"bf16\": true\n}");
        for text in [
            "{\n  \"a\": 1,\n  \"b\": {\"c\": 2}\n}\n",
            "{\"a\": [1, {}]}",
            "{}",
        ] {
            let v: serde_json::Value = serde_json::from_str(&add(text)).unwrap();
            assert_eq!(v["bf16"], serde_json::Value::Bool(true));
        }
    }
}
