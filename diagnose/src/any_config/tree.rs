//! Every key of a YAML or JSON config, at any depth, with its dotted path,
//! its line and its value: what recognising the format and reading its keys
//! need. YAML goes through `common::yaml_index` (yaml-rust2's positions);
//! JSON through jsonc-parser in strict JSON mode, after serde_json has
//! accepted the text (its nesting limit keeps the recursive walk shallow),
//! keeping each value's byte span for `--fix`.

use crate::keys::Scalar;
use common::bad_input;
use common::input::Input;
use common::yaml_index::{ValueKind, YamlIndex};

/// The syntax a config is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    Yaml,
    Json,
}

/// One key of the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Dotted path (`training.torch_compile_mode`, `datasets[0].type`).
    pub path: String,
    /// The key as written.
    pub name: String,
    /// 0 for a top-level key.
    pub depth: usize,
    pub line: usize,
    /// 1-based, in characters: where the key starts.
    pub col: usize,
    pub value: Scalar,
    /// The value as written (a string without its quotes; `{...}` or
    /// `[...]` for a collection).
    pub shown: String,
    /// JSON: the byte span of the value in the text.
    pub span: Option<(usize, usize)>,
}

/// A config file's keys.
pub struct Tree {
    pub syntax: Syntax,
    pub entries: Vec<Entry>,
}

impl Tree {
    /// The keys at the top level.
    pub fn top(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.depth == 0)
    }

    /// Reads `input`: JSON when it is a `.json` file or its text parses as
    /// JSON, else YAML. The top level must be a mapping.
    pub fn read(input: &Input) -> anyhow::Result<Tree> {
        let name = &input.name;
        let text = input.text.trim_start_matches('\u{feff}');
        if text.trim().is_empty() {
            return Err(bad_input!(
                "{name}: empty; expected a training config (YAML or JSON)"
            ));
        }
        let json_name = name.to_ascii_lowercase().ends_with(".json");
        let json_text = text.trim_start().starts_with('{')
            && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
        if json_name || json_text {
            // Spans count from the start of the file, its BOM included.
            let bom = input.text.len() - text.len();
            let mut tree = json(name, text)?;
            for e in &mut tree.entries {
                e.span = e.span.map(|(a, b)| (a + bom, b + bom));
            }
            return Ok(tree);
        }
        yaml(name, &input.text)
    }
}

fn top_mapping_expected(name: &str) -> anyhow::Error {
    bad_input!("{name}: expected a mapping of config keys at the top level")
}

fn yaml(name: &str, text: &str) -> anyhow::Result<Tree> {
    let value: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| bad_input!("{name}: not YAML: {e}"))?;
    if !value.is_mapping() {
        return Err(top_mapping_expected(name));
    }
    let index = YamlIndex::build(text);
    let depth = |parent: Option<&str>| {
        let mut d = 0;
        let mut at = parent.map(str::to_string);
        while let Some(p) = at.filter(|p| !p.is_empty()) {
            d += 1;
            at = index.nodes.get(&p).and_then(|n| n.parent.clone());
        }
        d
    };
    let entries = index
        .nodes
        .iter()
        .filter_map(|(path, node)| {
            let (name, key) = (node.name.clone()?, node.key?);
            let (value, shown) = match &node.kind {
                ValueKind::Scalar {
                    text, plain: true, ..
                } => (Scalar::from_plain_yaml(text), text.clone()),
                ValueKind::Scalar { text, .. } => (Scalar::Str(text.clone()), text.clone()),
                ValueKind::Mapping { .. } => (Scalar::Other, "{...}".into()),
                ValueKind::Sequence { .. } => (Scalar::Other, "[...]".into()),
                ValueKind::Alias => (Scalar::Other, "*alias".into()),
            };
            Some(Entry {
                path: path.clone(),
                name,
                depth: depth(node.parent.as_deref()),
                line: key.line,
                col: key.col,
                value,
                shown,
                span: None,
            })
        })
        .collect();
    let mut tree = Tree {
        syntax: Syntax::Yaml,
        entries,
    };
    tree.entries.sort_by_key(|e| e.line);
    Ok(tree)
}

fn json(name: &str, text: &str) -> anyhow::Result<Tree> {
    use jsonc_parser::ast::Value;
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map_err(|e| bad_input!("{name}: not JSON: {e}"))?;
    let strict = jsonc_parser::ParseOptions {
        allow_comments: false,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let ast = jsonc_parser::parse_to_ast(text, &Default::default(), &strict)
        .map_err(|e| bad_input!("{name}: not JSON: {e}"))?;
    let Some(Value::Object(root)) = ast.value else {
        return Err(top_mapping_expected(name));
    };
    let lines = LineStarts::of(text);
    let mut entries = Vec::new();
    walk_object(&root, "", 0, &lines, text, &mut entries);
    Ok(Tree {
        syntax: Syntax::Json,
        entries,
    })
}

/// The byte offset each line starts at, to turn an offset into a line.
struct LineStarts(Vec<usize>);

impl LineStarts {
    fn of(text: &str) -> LineStarts {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineStarts(starts)
    }
    fn line(&self, offset: usize) -> usize {
        self.0.partition_point(|&s| s <= offset)
    }
    /// The 1-based column of `offset`, in characters as an editor counts.
    fn col(&self, text: &str, offset: usize) -> usize {
        let start = self.0[self.line(offset) - 1];
        text.get(start..offset).map_or(1, |s| s.chars().count() + 1)
    }
}

fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

fn walk_object(
    object: &jsonc_parser::ast::Object,
    path: &str,
    depth: usize,
    lines: &LineStarts,
    text: &str,
    out: &mut Vec<Entry>,
) {
    for prop in &object.properties {
        let name = prop.name.as_str().to_string();
        let p = child(path, &name);
        let start = jsonc_parser::common::Ranged::range(&prop.name).start;
        push_value(
            &prop.value,
            &p,
            Some((name, start)),
            depth,
            lines,
            text,
            out,
        );
    }
}

/// Records a value (an entry when it has a key) and walks into it.
fn push_value(
    value: &jsonc_parser::ast::Value,
    path: &str,
    key: Option<(String, usize)>,
    depth: usize,
    lines: &LineStarts,
    text: &str,
    out: &mut Vec<Entry>,
) {
    use jsonc_parser::ast::Value;
    use jsonc_parser::common::Ranged;
    let range = value.range();
    let (scalar, shown) = match value {
        Value::BooleanLit(b) => (Scalar::Bool(b.value), b.value.to_string()),
        Value::NumberLit(n) => (
            n.value.parse().map_or(Scalar::Other, Scalar::Int),
            n.value.to_string(),
        ),
        Value::StringLit(s) => (Scalar::Str(s.value.to_string()), s.value.to_string()),
        Value::NullKeyword(_) => (Scalar::Null, "null".into()),
        Value::Object(_) => (Scalar::Other, "{...}".into()),
        Value::Array(_) => (Scalar::Other, "[...]".into()),
    };
    if let Some((name, start)) = key {
        out.push(Entry {
            path: path.to_string(),
            name,
            depth,
            line: lines.line(start),
            col: lines.col(text, start),
            value: scalar,
            shown,
            span: Some((range.start, range.end)),
        });
    }
    debug_assert!(range.end <= text.len());
    match value {
        Value::Object(o) => walk_object(o, path, depth + 1, lines, text, out),
        Value::Array(a) => {
            for (i, v) in a.elements.iter().enumerate() {
                push_value(
                    v,
                    &format!("{path}[{i}]"),
                    None,
                    depth + 1,
                    lines,
                    text,
                    out,
                );
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(name: &str, text: &str) -> Tree {
        Tree::read(&Input {
            name: name.into(),
            text: text.into(),
        })
        .unwrap()
    }

    fn find<'a>(t: &'a Tree, path: &str) -> &'a Entry {
        t.entries.iter().find(|e| e.path == path).unwrap()
    }

    #[test]
    fn yaml_keys_at_any_depth_with_lines() {
        let t = read(
            "c.yaml",
            "# project\nmodel: {name: bert}\ntraining:\n  torch_compile_mode: \"max-autotune\"\n  opts: {triton.cudagraphs: yes}\n  gradient_checkpointing: true\n",
        );
        assert_eq!(t.syntax, Syntax::Yaml);
        let m = find(&t, "training.torch_compile_mode");
        assert_eq!(
            (m.line, m.depth, m.name.as_str()),
            (4, 1, "torch_compile_mode")
        );
        assert_eq!(m.value, Scalar::Str("max-autotune".into()));
        let g = find(&t, "training.opts.triton.cudagraphs");
        assert_eq!(
            (g.name.as_str(), g.depth, &g.value),
            ("triton.cudagraphs", 2, &Scalar::Bool(true))
        );
        let top: Vec<&str> = t.top().map(|e| e.name.as_str()).collect();
        assert_eq!(top, ["model", "training"]);
    }

    #[test]
    fn json_keys_with_lines_and_spans() {
        let text = "{\n  \"output_dir\": \"out\",\n  \"training\": {\"torch_compile_mode\": \"reduce-overhead\",\n    \"dataloader_num_workers\": 2}\n}\n";
        let t = read("c.json", text);
        assert_eq!(t.syntax, Syntax::Json);
        let m = find(&t, "training.torch_compile_mode");
        assert_eq!((m.line, m.depth), (3, 1));
        let (a, b) = m.span.unwrap();
        assert_eq!(&text[a..b], "\"reduce-overhead\"");
        let w = find(&t, "training.dataloader_num_workers");
        assert_eq!((w.line, &w.value), (4, &Scalar::Int(2)));
    }

    #[test]
    fn refusals_name_the_file() {
        for (name, text) in [
            ("c.json", "{\"a\": 1,}"),
            ("c.yaml", "a: [1, 2\n"),
            ("c.yaml", "- a\n- b\n"),
            ("c.json", "[1]"),
            ("c.yaml", "  \n"),
        ] {
            let e = Tree::read(&Input {
                name: name.into(),
                text: text.into(),
            })
            .err()
            .unwrap();
            assert_eq!(common::exit::code_of(&e), common::exit::BAD_INPUT);
            assert!(format!("{e:#}").contains(name), "{e:#}");
        }
    }
}
