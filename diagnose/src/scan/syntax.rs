//! What a Python syntax tree says, read from tree-sitter-python's nodes:
//! the names a file's imports bind, a call's callee and arguments, and the
//! literals whose values a hazard depends on. No rules here: `python.rs`
//! applies them.

use std::collections::HashMap;
use tree_sitter::Node;

/// The names a file's imports bind, to the dotted names they stand for
/// (`import torch.utils.checkpoint as cp`: cp -> torch.utils.checkpoint;
/// `from torch.utils.checkpoint import checkpoint as ckpt`: ckpt ->
/// torch.utils.checkpoint.checkpoint), and the modules `*` was imported
/// from. Imports anywhere in the file count: a file rarely binds one name
/// to two modules.
#[derive(Default)]
pub struct Imports {
    names: HashMap<String, String>,
    star: Vec<String>,
}

impl Imports {
    /// Records an `import_statement` or `import_from_statement`.
    pub fn add(&mut self, node: Node, src: &[u8]) {
        let mut cursor = node.walk();
        match node.kind() {
            "import_statement" => {
                for n in node.children_by_field_name("name", &mut cursor) {
                    match n.kind() {
                        // `import a.b.c` binds a.
                        "dotted_name" => {
                            let full = text(n, src);
                            let root = full.split('.').next().unwrap_or(full).trim();
                            self.names.insert(root.to_string(), root.to_string());
                        }
                        "aliased_import" => {
                            if let (Some(name), Some(alias)) = (
                                n.child_by_field_name("name"),
                                n.child_by_field_name("alias"),
                            ) {
                                self.names
                                    .insert(text(alias, src).into(), dotted_text(name, src));
                            }
                        }
                        _ => {}
                    }
                }
            }
            "import_from_statement" => {
                let Some(module) = node.child_by_field_name("module_name") else {
                    return;
                };
                let module = dotted_text(module, src);
                let mut wildcard = false;
                for i in 0..node.named_child_count() {
                    if node
                        .named_child(i as u32)
                        .is_some_and(|c| c.kind() == "wildcard_import")
                    {
                        wildcard = true;
                    }
                }
                if wildcard {
                    self.star.push(module);
                    return;
                }
                for n in node.children_by_field_name("name", &mut cursor) {
                    let (name, alias) = match n.kind() {
                        "dotted_name" => (dotted_text(n, src), dotted_text(n, src)),
                        "aliased_import" => match (
                            n.child_by_field_name("name"),
                            n.child_by_field_name("alias"),
                        ) {
                            (Some(name), Some(alias)) => {
                                (dotted_text(name, src), text(alias, src).to_string())
                            }
                            _ => continue,
                        },
                        _ => continue,
                    };
                    self.names.insert(alias, format!("{module}.{name}"));
                }
            }
            _ => {}
        }
    }

    /// Whether any import binds `module` or a name inside it (or `*` of it).
    pub fn binds_from(&self, module: &str) -> bool {
        let inside = |n: &str| {
            n.strip_prefix(module)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        };
        self.names.values().any(|n| inside(n)) || self.star.iter().any(|n| inside(n))
    }

    /// The dotted name `path` stands for, with whether its first name was
    /// bound by an import. A name from `from m import *` is taken as m's
    /// when m's name joined to it is one of `known`.
    pub fn resolve(&self, path: &[&str], known: &[&str]) -> (String, bool) {
        let rest = path[1..]
            .iter()
            .map(|p| format!(".{p}"))
            .collect::<String>();
        if let Some(full) = self.names.get(path[0]) {
            return (format!("{full}{rest}"), true);
        }
        let plain = format!("{}{rest}", path[0]);
        for m in &self.star {
            let candidate = format!("{m}.{plain}");
            if known.contains(&candidate.as_str()) {
                return (candidate, true);
            }
        }
        (plain, false)
    }
}

/// A node's source text ("" where it is not UTF-8, which a parsed file
/// never is: the scanner reads only UTF-8).
pub fn text<'a>(node: Node, src: &'a [u8]) -> &'a str {
    node.utf8_text(src).unwrap_or("")
}

/// A dotted name's text without the spaces Python allows inside it
/// (`torch . utils`).
fn dotted_text(node: Node, src: &[u8]) -> String {
    text(node, src).split_whitespace().collect()
}

/// A callee as its names (`torch.utils.checkpoint.checkpoint` -> four),
/// when it is a name or a chain of attributes of one.
pub fn dotted<'a>(node: Node, src: &'a [u8]) -> Option<Vec<&'a str>> {
    match node.kind() {
        "identifier" => Some(vec![text(node, src)]),
        "attribute" => {
            let mut path = dotted(node.child_by_field_name("object")?, src)?;
            path.push(text(node.child_by_field_name("attribute")?, src));
            Some(path)
        }
        _ => None,
    }
}

/// The attribute a method call calls (`get_model().gradient_checkpointing_enable()`).
pub fn method<'a>(callee: Node, src: &'a [u8]) -> Option<&'a str> {
    (callee.kind() == "attribute")
        .then(|| callee.child_by_field_name("attribute"))
        .flatten()
        .map(|a| text(a, src))
}

/// A call's arguments: positional ones, keyword ones by name, and whether
/// `*args` or `**kwargs` may add more.
pub struct Args<'t> {
    pub positional: Vec<Node<'t>>,
    pub keyword: Vec<(&'t str, Node<'t>, Node<'t>)>,
    pub splat: bool,
}

impl<'t> Args<'t> {
    pub fn of(call: Node<'t>, src: &'t [u8]) -> Args<'t> {
        let mut args = Args {
            positional: vec![],
            keyword: vec![],
            splat: false,
        };
        let Some(list) = call.child_by_field_name("arguments") else {
            return args;
        };
        let mut cursor = list.walk();
        for a in list.named_children(&mut cursor) {
            match a.kind() {
                "keyword_argument" => {
                    if let (Some(name), Some(value)) = (
                        a.child_by_field_name("name"),
                        a.child_by_field_name("value"),
                    ) {
                        args.keyword.push((text(name, src), value, a));
                    }
                }
                "list_splat" | "dictionary_splat" => args.splat = true,
                "comment" => {}
                _ => args.positional.push(a),
            }
        }
        args
    }

    /// The value of keyword `name`, and the keyword argument itself (for
    /// its line).
    pub fn get(&self, name: &str) -> Option<(Node<'t>, Node<'t>)> {
        self.keyword
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, v, a)| (*v, *a))
    }
}

/// A literal value in the code.
#[derive(Debug, PartialEq)]
pub enum Literal {
    Str(String),
    Bytes,
    Int(u64),
    Bool(bool),
    None,
}

/// The value of an expression that is a literal: a string without
/// interpolation (adjacent strings joined), a non-negative integer (one
/// above u64 reads as u64::MAX), True, False, None; parentheses see
/// through. Anything else (a name, a call, an f-string with a field) is
/// not known from the code.
pub fn literal(node: Node, src: &[u8]) -> Option<Literal> {
    match node.kind() {
        "string" => string(node, src),
        "concatenated_string" => {
            let mut out = String::new();
            let mut cursor = node.walk();
            for s in node.named_children(&mut cursor) {
                match s.kind() {
                    "string" => match string(s, src)? {
                        Literal::Str(part) => out.push_str(&part),
                        _ => return Some(Literal::Bytes),
                    },
                    "comment" => {}
                    _ => return None,
                }
            }
            Some(Literal::Str(out))
        }
        "integer" => integer(text(node, src)).map(Literal::Int),
        "true" => Some(Literal::Bool(true)),
        "false" => Some(Literal::Bool(false)),
        "none" => Some(Literal::None),
        "parenthesized_expression" => {
            let mut cursor = node.walk();
            let inner: Vec<Node> = node
                .named_children(&mut cursor)
                .filter(|c| c.kind() != "comment")
                .collect();
            match inner[..] {
                [one] => literal(one, src),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A string literal's value (bytes are a literal too, of no interest);
/// None with an interpolated field.
fn string(node: Node, src: &[u8]) -> Option<Literal> {
    let mut out = String::new();
    let mut cursor = node.walk();
    let mut bytes = false;
    for part in node.children(&mut cursor) {
        match part.kind() {
            "string_start" => bytes = text(part, src).to_ascii_lowercase().contains('b'),
            "string_content" | "escape_sequence" => out.push_str(text(part, src)),
            "interpolation" => return None,
            _ => {}
        }
    }
    Some(if bytes {
        Literal::Bytes
    } else {
        Literal::Str(out)
    })
}

/// A Python integer literal's value (`2`, `1_000`, `0x10`).
fn integer(s: &str) -> Option<u64> {
    let s: String = s.chars().filter(|c| *c != '_').collect();
    let lower = s.to_ascii_lowercase();
    let (digits, radix) = match lower.get(..2) {
        Some("0x") => (&lower[2..], 16),
        Some("0o") => (&lower[2..], 8),
        Some("0b") => (&lower[2..], 2),
        _ => (&lower[..], 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    Some(u64::from_str_radix(digits, radix).unwrap_or(u64::MAX))
}

/// Whether an `if` statement's condition is `__name__ == "__main__"`: a
/// script's main block, which runs on every run of it.
pub fn is_main_guard(if_statement: Node, src: &[u8]) -> bool {
    let Some(cond) = if_statement.child_by_field_name("condition") else {
        return false;
    };
    let t: String = text(cond, src)
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| if c == '\'' { '"' } else { c })
        .collect();
    t == "__name__==\"__main__\"" || t == "\"__main__\"==__name__"
}

/// Source text for a message: on one line, at most `max` characters.
pub fn clip(s: &str, max: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &one[..i]),
        None => one,
    }
}
