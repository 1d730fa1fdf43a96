//! Functions that run the same checkpointed blocks more than once in one
//! forward (pytorch#193193): two loops over the same blocks, each calling
//! `torch.utils.checkpoint.checkpoint` on the loop's block (CoCa's and
//! MaMMUT's text tower: once without cross-attention context, once with);
//! one such loop inside another loop; the same block checkpointed twice or
//! in a loop; or a helper of the same file that traverses the blocks,
//! called twice. Branches of one `if` are not both run, so they do not
//! count twice. Pure: the tree and two questions about it in, facts out.

use super::syntax::{clip, text};
use super::{Fact, Site};
use std::collections::BTreeMap;
use tree_sitter::Node;

/// One run of checkpointed blocks in a function: a loop whose block is the
/// loop's variable, or one checkpoint call of a fixed block.
struct Unit<'t> {
    /// What is run: the loop's iterable, or the block's expression.
    blocks: String,
    /// The loop, or the call.
    node: Node<'t>,
    /// Inside another loop of the same function: it runs many times.
    repeated: bool,
}

/// The facts of one file: a `CheckpointedTwice` per function and blocks.
/// `is_checkpoint` tells torch's checkpoint calls (under the file's
/// imports); `site` places a node.
pub fn facts(
    root: Node,
    src: &[u8],
    is_checkpoint: &dyn Fn(Node) -> bool,
    site: &dyn Fn(Node) -> Site,
) -> Vec<Fact> {
    let defs = functions(root);
    let units: Vec<(Node, Vec<Unit>)> = defs
        .iter()
        .map(|d| (*d, units_of(*d, src, is_checkpoint)))
        .collect();
    // The helpers that traverse blocks, by name, for calls to them.
    let mut helpers: BTreeMap<&str, String> = BTreeMap::new();
    for (d, u) in &units {
        if let (Some(name), Some(first)) = (d.child_by_field_name("name"), u.first()) {
            helpers.insert(text(name, src), first.blocks.clone());
        }
    }
    let mut out = vec![];
    for (d, u) in &units {
        let name = d.child_by_field_name("name").map_or("?", |n| text(n, src));
        let mut by_blocks: BTreeMap<&str, Vec<&Unit>> = BTreeMap::new();
        for unit in u {
            by_blocks.entry(&unit.blocks).or_default().push(unit);
        }
        for (blocks, runs) in by_blocks {
            if let Some((at, how)) = twice(&runs, src) {
                out.push(Fact::CheckpointedTwice {
                    at: site(at),
                    blocks: blocks.to_string(),
                    how: format!("{how} in {name}()"),
                });
            }
        }
        let calls = helper_calls(*d, src, &helpers);
        for (helper, runs) in calls {
            let runs: Vec<&Unit> = runs.iter().collect();
            if let Some((at, how)) = twice(&runs, src) {
                out.push(Fact::CheckpointedTwice {
                    at: site(at),
                    blocks: helpers[helper.as_str()].clone(),
                    how: format!("{how} in {name}(), and {helper}() checkpoints each block"),
                });
            }
        }
    }
    out
}

/// Whether the runs of one set of blocks make two traversals in one call of
/// the function: the place that shows it, and how, in words.
fn twice<'t>(runs: &[&Unit<'t>], src: &[u8]) -> Option<(Node<'t>, String)> {
    if let Some(r) = runs.iter().find(|r| r.repeated) {
        let what = if r.node.kind() == "call" {
            format!("{} checkpointed inside a loop", r.blocks)
        } else {
            format!("a loop over {} inside another loop", r.blocks)
        };
        return Some((r.node, what));
    }
    for (i, a) in runs.iter().enumerate() {
        if let Some(b) = runs[i + 1..].iter().find(|b| !exclusive(a.node, b.node)) {
            let line = |n: Node| n.start_position().row + 1;
            let what = match a.node.kind() {
                "call" => format!(
                    "{} at lines {} and {}",
                    clip(text(a.node, src), 40),
                    line(a.node),
                    line(b.node)
                ),
                _ => format!(
                    "2 loops over {} (lines {} and {})",
                    a.blocks,
                    line(a.node),
                    line(b.node)
                ),
            };
            return Some((b.node, what));
        }
    }
    None
}

/// Every function definition in the tree (methods, nested ones).
fn functions(root: Node) -> Vec<Node> {
    let mut out = vec![];
    let mut stack = vec![root];
    let mut cursor = root.walk();
    while let Some(n) = stack.pop() {
        if n.kind() == "function_definition" {
            out.push(n);
        }
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort_by_key(|n| n.start_byte());
    out
}

/// The nodes of a function's own body, not those of functions or classes
/// defined inside it.
fn own_nodes(def: Node) -> Vec<Node> {
    let mut out = vec![];
    let Some(body) = def.child_by_field_name("body") else {
        return out;
    };
    let mut stack = vec![body];
    let mut cursor = body.walk();
    while let Some(n) = stack.pop() {
        if matches!(n.kind(), "function_definition" | "class_definition") {
            continue;
        }
        out.push(n);
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort_by_key(|n| n.start_byte());
    out
}

/// The loops around `node`, innermost first, up to `def`.
fn loops_around<'t>(node: Node<'t>, def: Node<'t>) -> Vec<Node<'t>> {
    let mut out = vec![];
    let mut n = node.parent();
    while let Some(p) = n {
        if p.id() == def.id() {
            break;
        }
        if matches!(p.kind(), "for_statement" | "while_statement") {
            out.push(p);
        }
        n = p.parent();
    }
    out
}

/// Whether an identifier named `name` occurs in `node`.
fn mentions(node: Node, name: &str, src: &[u8]) -> bool {
    let mut stack = vec![node];
    let mut cursor = node.walk();
    while let Some(n) = stack.pop() {
        if n.kind() == "identifier" && text(n, src) == name {
            return true;
        }
        stack.extend(n.named_children(&mut cursor));
    }
    false
}

/// The names a `for` binds (`blk`, `i, blk`, `(i, blk)`).
fn loop_names<'t>(for_statement: Node<'t>, src: &'t [u8]) -> Vec<&'t str> {
    let Some(left) = for_statement.child_by_field_name("left") else {
        return vec![];
    };
    let mut out = vec![];
    let mut stack = vec![left];
    let mut cursor = left.walk();
    while let Some(n) = stack.pop() {
        if n.kind() == "identifier" {
            out.push(text(n, src));
        }
        stack.extend(n.named_children(&mut cursor));
    }
    out
}

/// What a loop runs over, as written, without `enumerate(...)`.
fn iterable(for_statement: Node, src: &[u8]) -> String {
    let Some(right) = for_statement.child_by_field_name("right") else {
        return String::new();
    };
    let t = text(right, src).split_whitespace().collect::<String>();
    t.strip_prefix("enumerate(")
        .and_then(|r| r.strip_suffix(')'))
        .map_or(t.clone(), str::to_string)
}

/// The runs of checkpointed blocks in one function, one per loop or call.
fn units_of<'t>(def: Node<'t>, src: &[u8], is_checkpoint: &dyn Fn(Node) -> bool) -> Vec<Unit<'t>> {
    let mut out: Vec<Unit> = vec![];
    for call in own_nodes(def).into_iter().filter(|n| n.kind() == "call") {
        if !is_checkpoint(call) {
            continue;
        }
        let Some(block) = call
            .child_by_field_name("arguments")
            .and_then(|a| a.named_child(0))
            .filter(|a| a.kind() != "keyword_argument")
        else {
            continue;
        };
        let loops = loops_around(call, def);
        // The innermost loop whose variable the block is (or is built from).
        let own = loops.iter().position(|l| {
            l.kind() == "for_statement"
                && loop_names(*l, src).iter().any(|v| mentions(block, v, src))
        });
        let unit = match own {
            Some(i) => Unit {
                blocks: iterable(loops[i], src),
                node: loops[i],
                repeated: i + 1 < loops.len(),
            },
            None => Unit {
                blocks: text(block, src).split_whitespace().collect(),
                node: call,
                repeated: !loops.is_empty(),
            },
        };
        // Several checkpoint calls in one loop are one traversal.
        if !out.iter().any(|u| u.node.id() == unit.node.id()) {
            out.push(unit);
        }
    }
    out
}

/// The calls in `def` to the file's block-traversing helpers (`name(...)`,
/// `self.name(...)`), as runs of the helper's blocks.
fn helper_calls<'t>(
    def: Node<'t>,
    src: &[u8],
    helpers: &BTreeMap<&str, String>,
) -> BTreeMap<String, Vec<Unit<'t>>> {
    let own = def.child_by_field_name("name").map(|n| text(n, src));
    let mut out: BTreeMap<String, Vec<Unit>> = BTreeMap::new();
    for call in own_nodes(def).into_iter().filter(|n| n.kind() == "call") {
        let Some(callee) = call.child_by_field_name("function") else {
            continue;
        };
        let name = match callee.kind() {
            "identifier" => text(callee, src),
            "attribute" => match callee.child_by_field_name("object") {
                Some(o) if matches!(text(o, src), "self" | "cls") => callee
                    .child_by_field_name("attribute")
                    .map_or("", |a| text(a, src)),
                _ => continue,
            },
            _ => continue,
        };
        if Some(name) == own || !helpers.contains_key(name) {
            continue;
        }
        out.entry(name.to_string()).or_default().push(Unit {
            blocks: helpers[name].clone(),
            node: call,
            repeated: !loops_around(call, def).is_empty(),
        });
    }
    out
}

/// Whether two nodes are in different branches of one `if` (or of one
/// conditional expression), so that one call runs only one of them.
fn exclusive(a: Node, b: Node) -> bool {
    let mut above_a = vec![];
    let mut n = Some(a);
    while let Some(p) = n {
        above_a.push(p);
        n = p.parent();
    }
    let mut child_b = b;
    let mut n = b.parent();
    while let Some(p) = n {
        if let Some(i) = above_a.iter().position(|x| x.id() == p.id()) {
            let child_a = if i == 0 { a } else { above_a[i - 1] };
            return matches!(p.kind(), "if_statement" | "conditional_expression")
                && child_a.id() != child_b.id()
                && !is_condition(p, child_a)
                && !is_condition(p, child_b);
        }
        child_b = p;
        n = p.parent();
    }
    false
}

/// Whether `child` is the condition of `if_node` (which always runs).
fn is_condition(if_node: Node, child: Node) -> bool {
    if_node
        .child_by_field_name("condition")
        .is_some_and(|c| c.id() == child.id())
}
