//! Targeted edits of a YAML file that keep everything else as the user wrote
//! it: comments, key order, quoting, blank lines. Setting a key replaces its
//! scalar in place; a missing key is inserted as a new line at the end of its
//! block mapping (its parent is created the same way when missing). Flow
//! collections (`{...}`, `[...]`) and block scalars are not edited: the
//! caller is told so.

use common::yaml_index::{Node, ValueKind, YamlIndex};

/// Sets `path` (`a.b`, dotted mapping keys only) to `value`, YAML scalar text
/// (`16`, `true`, `default`, `"a: b"`; see `scalar`), returning the new text.
pub fn set(text: &str, path: &str, value: &str) -> Result<String, String> {
    let index = YamlIndex::build(text);
    if index.nodes.is_empty() && !text.trim().is_empty() {
        return Err("the file does not parse as YAML".into());
    }
    match index.nodes.get(path) {
        Some(node) => replace_scalar(text, &index, path, node, value),
        None => insert(text, &index, path, value),
    }
}

fn parent_of(path: &str) -> (&str, &str) {
    match path.rsplit_once('.') {
        Some((p, k)) => (p, k),
        None => ("", path),
    }
}

fn in_flow(index: &YamlIndex, path: &str) -> bool {
    // The node's own parent (a key may hold a `.`), else the path's.
    let parent = match index.nodes.get(path).and_then(|n| n.parent.as_deref()) {
        Some(p) => p,
        None => parent_of(path).0,
    };
    matches!(
        index.nodes.get(parent).map(|n| &n.kind),
        Some(ValueKind::Mapping { flow: true } | ValueKind::Sequence { flow: true })
    )
}

/// Byte offset of a 1-based (line, column in characters) position.
fn offset(text: &str, line: usize, col: usize) -> usize {
    let start: usize = text
        .split_inclusive('\n')
        .take(line - 1)
        .map(str::len)
        .sum();
    let line_text = &text[start..];
    start
        + line_text
            .char_indices()
            .nth(col - 1)
            .map_or(line_text.len(), |(i, _)| i)
}

fn replace_scalar(
    text: &str,
    index: &YamlIndex,
    path: &str,
    node: &Node,
    value: &str,
) -> Result<String, String> {
    let ValueKind::Scalar {
        plain,
        block,
        text: was,
    } = &node.kind
    else {
        return Err(format!("`{path}` is a collection, not a single value"));
    };
    if *block {
        return Err(format!(
            "`{path}` is a block scalar (| or >); edit it by hand"
        ));
    }
    // `key:` with no value (null): the parser places the empty scalar at the
    // next token, so the value goes right after the key's colon.
    if *plain && was.is_empty() {
        if let Some(key) = node.key {
            return fill_empty(text, key.line, key.col, value)
                .ok_or_else(|| format!("cannot find the `:` after `{path}`"));
        }
    }
    let start = offset(text, node.value.line, node.value.col);
    let rest = &text[start..];
    let flow = in_flow(index, path);
    let (len, quote) = if *plain {
        // A plain scalar ends at the line's end, a comment, or (in a flow
        // collection) the next separator.
        let end = rest
            .char_indices()
            .find(|&(i, ch)| {
                ch == '\n'
                    || (ch == '#' && rest[..i].ends_with([' ', '\t']))
                    || (flow && matches!(ch, ',' | '}' | ']'))
            })
            .map_or(rest.len(), |(i, _)| i);
        (rest[..end].trim_end().len(), None)
    } else {
        let q = rest.chars().next().ok_or("empty value")?;
        let mut chars = rest.char_indices().skip(1);
        let mut end = None;
        while let Some((i, ch)) = chars.next() {
            if q == '"' && ch == '\\' {
                chars.next();
            } else if ch == q {
                // '' inside single quotes is an escaped quote.
                if q == '\'' && rest[i + 1..].starts_with('\'') {
                    chars.next();
                    continue;
                }
                end = Some(i + 1);
                break;
            }
        }
        (
            end.ok_or_else(|| format!("unterminated quoted value for `{path}`"))?,
            Some(q),
        )
    };
    // Keep the user's quoting when the new value is a string.
    let new = match (quote, serde_yaml::from_str::<serde_yaml::Value>(value)) {
        (Some(q), Ok(serde_yaml::Value::String(s))) if !s.contains(q) && !s.contains('\\') => {
            format!("{q}{s}{q}")
        }
        _ => value.to_string(),
    };
    Ok(format!("{}{}{}", &text[..start], new, &text[start + len..]))
}

/// `text` with `value` after the `:` that ends the key at (line, col)
/// (the first `:` followed by a space, a tab or the line's end, past a
/// quoted key's closing quote).
fn fill_empty(text: &str, line: usize, col: usize, value: &str) -> Option<String> {
    let start = offset(text, line, col);
    let rest = &text[start..];
    let line_text = &rest[..rest.find('\n').unwrap_or(rest.len())];
    let skip = match line_text.chars().next() {
        Some(q @ ('"' | '\'')) => line_text[1..].find(q).map_or(0, |i| i + 2),
        _ => 0,
    };
    let colon = line_text[skip..]
        .char_indices()
        .find(|&(i, c)| {
            c == ':'
                && line_text[skip + i + 1..]
                    .chars()
                    .next()
                    .is_none_or(|n| n == ' ' || n == '\t')
        })
        .map(|(i, _)| start + skip + i + 1)?;
    // Blanks alone after the colon go; a comment stays where it was.
    let tail = &line_text[colon - start..];
    let keep = if tail.trim().is_empty() {
        colon + tail.len()
    } else {
        colon
    };
    Some(format!("{} {value}{}", &text[..colon], &text[keep..]))
}

/// The last line of the subtree at `path` (the whole document for ``).
fn last_line(text: &str, index: &YamlIndex, path: &str) -> usize {
    if path.is_empty() {
        return text.lines().count();
    }
    index
        .nodes
        .iter()
        .filter(|(p, _)| {
            *p == path || p.starts_with(&format!("{path}.")) || p.starts_with(&format!("{path}["))
        })
        .map(|(_, n)| n.value.line)
        .max()
        .unwrap_or(0)
}

fn insert(text: &str, index: &YamlIndex, path: &str, value: &str) -> Result<String, String> {
    let (parent, key) = parent_of(path);
    if !parent.is_empty() && !index.nodes.contains_key(parent) {
        // Create the parent as an empty block mapping first, then retry.
        let with_parent = insert_line(text, index, parent, None)?;
        return set(&with_parent, path, value);
    }
    match index.nodes.get(parent).map(|n| &n.kind) {
        Some(ValueKind::Mapping { flow: false }) | None => {}
        Some(ValueKind::Mapping { flow: true }) => {
            return Err(format!(
                "`{parent}` is written in flow style ({{...}}); add `{key}: {value}` to it by hand"
            ))
        }
        // `parent:` with nothing after it opens a block mapping.
        Some(ValueKind::Scalar { .. }) if opens_block(text, index, parent) => {}
        Some(_) => return Err(format!("`{parent}` is not a mapping")),
    }
    insert_line(text, index, path, Some(value))
}

/// True when `path`'s key line is `key:` with nothing but a comment after it.
fn opens_block(text: &str, index: &YamlIndex, path: &str) -> bool {
    let Some(key) = index.nodes.get(path).and_then(|n| n.key) else {
        return false;
    };
    let line = text.lines().nth(key.line - 1).unwrap_or("");
    let after_key: String = line.chars().skip(key.col - 1).collect();
    after_key
        .split_once(':')
        .is_some_and(|(_, rest)| rest.trim().is_empty() || rest.trim_start().starts_with('#'))
}

/// Inserts `key: value` (or `key:` opening a block mapping) for `path` after
/// the last line of its parent's block.
fn insert_line(
    text: &str,
    index: &YamlIndex,
    path: &str,
    value: Option<&str>,
) -> Result<String, String> {
    let (parent, key) = parent_of(path);
    if parent.contains('.') && !index.nodes.contains_key(parent) {
        return Err(format!("cannot create nested `{parent}`"));
    }
    // The indentation of the parent's existing children, else two more
    // spaces than the parent's key.
    let sibling_col = index
        .nodes
        .iter()
        .filter(|(p, _)| parent_of(p).0 == parent && !p.contains('[') && p.as_str() != parent)
        .filter_map(|(_, n)| n.key.map(|k| k.col))
        .min();
    let indent = match (sibling_col, index.nodes.get(parent).and_then(|n| n.key)) {
        (Some(col), _) => col - 1,
        (None, Some(k)) => k.col - 1 + 2,
        (None, None) => 0,
    };
    let after = last_line(text, index, parent);
    let mut lines: Vec<&str> = text.lines().collect();
    let new_line = match value {
        Some(v) => format!("{}{key}: {v}", " ".repeat(indent)),
        None => format!("{}{key}:", " ".repeat(indent)),
    };
    let at = after.min(lines.len());
    lines.insert(at, &new_line);
    let mut out = lines.join("\n");
    out.push('\n');
    Ok(out)
}

/// Quotes a string for YAML when a plain scalar would change its meaning.
pub fn scalar(value: &str) -> String {
    let plain_ok = !value.is_empty()
        && !value.starts_with(|c: char| "!&*-?{}[],#|>@`\"'%: ".contains(c))
        && !value.contains(": ")
        && !value.contains(" #")
        && !value.ends_with([':', ' '])
        && serde_yaml::from_str::<serde_yaml::Value>(value).ok()
            == Some(serde_yaml::Value::String(value.into()));
    if plain_ok {
        value.to_string()
    } else {
        format!("{value:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# Memory & Performance\nmemory_optimized: false   # full model\ntorch_compile_mode: \"reduce-overhead\"  # CUDA graphs\nbatch_size: 20\n\n# Model\narchitecture:\n  name: \"transformer\"  # Full\n  channels: [64, 128]\nenvironment: {A: b}\n";

    fn get(text: &str, path: &str) -> serde_yaml::Value {
        let v: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
        path.split('.').fold(v, |v, k| {
            v.get(k).cloned().unwrap_or(serde_yaml::Value::Null)
        })
    }

    #[test]
    fn replaces_in_place_keeping_comments_and_quotes() {
        let out = set(TEXT, "torch_compile_mode", "default").unwrap();
        assert!(
            out.contains("torch_compile_mode: \"default\"  # CUDA graphs\n"),
            "{out}"
        );
        let out = set(&out, "memory_optimized", "true").unwrap();
        assert!(
            out.contains("memory_optimized: true   # full model\n"),
            "{out}"
        );
        let out = set(&out, "architecture.name", "cnn").unwrap();
        assert!(out.contains("  name: \"cnn\"  # Full\n"), "{out}");
        assert!(out.starts_with("# Memory & Performance\n"));
        assert_eq!(out.lines().count(), TEXT.lines().count());
    }

    #[test]
    fn fills_an_empty_value_after_its_colon() {
        let text = "batch_size: 32\nmicro_batch_size:   # none: whole batches\nepochs: 2\nlast:\n";
        let out = set(text, "micro_batch_size", "8").unwrap();
        assert_eq!(
            out,
            "batch_size: 32\nmicro_batch_size: 8   # none: whole batches\nepochs: 2\nlast:\n"
        );
        let out = set(&out, "last", "true").unwrap();
        assert!(out.ends_with("epochs: 2\nlast: true\n"), "{out}");
        assert_eq!(get(&out, "micro_batch_size"), serde_yaml::Value::from(8));
    }

    #[test]
    fn inserts_missing_keys_in_their_block() {
        let out = set(TEXT, "architecture.embed_dim", "64").unwrap();
        assert_eq!(
            get(&out, "architecture.embed_dim"),
            serde_yaml::Value::from(64)
        );
        assert!(
            out.contains("  channels: [64, 128]\n  embed_dim: 64\n"),
            "{out}"
        );
        let out = set(TEXT, "epochs", "3").unwrap();
        assert_eq!(get(&out, "epochs"), serde_yaml::Value::from(3));
        let plain = "batch_size: 2\n";
        let out = set(plain, "data.synthetic_train_examples", "10").unwrap();
        assert_eq!(
            out,
            "batch_size: 2\ndata:\n  synthetic_train_examples: 10\n"
        );
    }

    #[test]
    fn refuses_what_it_cannot_edit_safely() {
        assert!(set(TEXT, "environment.X", "1")
            .unwrap_err()
            .contains("flow style"));
        assert!(set(TEXT, "architecture", "1")
            .unwrap_err()
            .contains("collection"));
        assert!(set("a: |\n  text\n", "a", "b")
            .unwrap_err()
            .contains("block scalar"));
    }

    #[test]
    fn values_are_quoted_only_when_needed() {
        assert_eq!(scalar("default"), "default");
        assert_eq!(
            scalar("expandable_segments:True"),
            "expandable_segments:True"
        );
        assert_eq!(scalar("true"), "\"true\"");
        assert_eq!(scalar("a: b"), "\"a: b\"");
        assert_eq!(scalar("16"), "\"16\"");
    }
}
