//! Where each key and value of a YAML document stands. serde_yaml gives a line
//! only for its own type errors; checks made after parsing (batch_size 0) and
//! `cfgcheck --fix`'s in-place edits need the position of any key path, such as
//! `architecture.channels[1]`. yaml-rust2's event parser reports them.

use std::collections::BTreeMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A position as a user counts it: 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A scalar, with its text as parsed and whether it was written plain
    /// (unquoted) or in block style (`|`, `>`), which an edit cannot replace.
    Scalar {
        text: String,
        plain: bool,
        block: bool,
    },
    Mapping {
        flow: bool,
    },
    Sequence {
        flow: bool,
    },
    Alias,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The key as written (None for sequence items and the root): a path
    /// cannot give it back when a key holds a `.` (`triton.cudagraphs`).
    pub name: Option<String>,
    /// The path of the collection holding it (None for the root).
    pub parent: Option<String>,
    /// Where the key stands (None for sequence items and the root).
    pub key: Option<Pos>,
    pub value: Pos,
    pub kind: ValueKind,
}

/// Every node of the first document, by path (`a.b`, `a.list[2]`; the root
/// mapping is ``).
#[derive(Debug, Default)]
pub struct YamlIndex {
    pub nodes: BTreeMap<String, Node>,
}

enum Frame {
    Map {
        path: String,
        key: Option<(String, Pos)>,
    },
    Seq {
        path: String,
        next: usize,
    },
}

/// A value's path, its key's position, its key and its parent's path.
type Placed = (String, Option<Pos>, Option<String>, Option<String>);

#[derive(Default)]
struct Builder {
    index: YamlIndex,
    stack: Vec<Frame>,
    done: bool,
}

fn pos(m: &Marker) -> Pos {
    // yaml-rust2 counts columns from 0.
    Pos {
        line: m.line(),
        col: m.col() + 1,
    }
}

fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl Builder {
    /// The value that starts now (its path, its key's position, its key and
    /// its parent's path); None when the event is a mapping key rather than
    /// a value.
    fn value_path(&mut self, ev: &Event, at: Pos) -> Option<Placed> {
        match self.stack.last_mut() {
            None => Some((String::new(), None, None, None)),
            Some(Frame::Seq { path, next }) => {
                let p = format!("{path}[{next}]");
                *next += 1;
                Some((p, None, None, Some(path.clone())))
            }
            Some(Frame::Map { path, key }) => match key.take() {
                Some((k, kpos)) => Some((child(path, &k), Some(kpos), Some(k), Some(path.clone()))),
                None => {
                    let text = match ev {
                        Event::Scalar(s, ..) => s.clone(),
                        _ => "<complex key>".to_string(),
                    };
                    *key = Some((text, at));
                    None
                }
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.done {
            return;
        }
        let at = pos(&mark);
        match &ev {
            Event::Scalar(..)
            | Event::Alias(_)
            | Event::MappingStart(..)
            | Event::SequenceStart(..) => {
                // A complex key (a mapping used as a key) is skipped whole.
                let Some((path, key, name, parent)) = self.value_path(&ev, at) else {
                    if matches!(ev, Event::MappingStart(..) | Event::SequenceStart(..)) {
                        self.stack.push(Frame::Seq {
                            path: "<complex key>".into(),
                            next: 0,
                        });
                    }
                    return;
                };
                let kind = match &ev {
                    Event::Scalar(text, style, ..) => ValueKind::Scalar {
                        text: text.clone(),
                        plain: *style == TScalarStyle::Plain,
                        block: matches!(style, TScalarStyle::Literal | TScalarStyle::Folded),
                    },
                    Event::Alias(_) => ValueKind::Alias,
                    // Block or flow is read from the source in `build`.
                    Event::MappingStart(..) => ValueKind::Mapping { flow: false },
                    _ => ValueKind::Sequence { flow: false },
                };
                self.index.nodes.insert(
                    path.clone(),
                    Node {
                        name,
                        parent,
                        key,
                        value: at,
                        kind,
                    },
                );
                match ev {
                    Event::MappingStart(..) => self.stack.push(Frame::Map { path, key: None }),
                    Event::SequenceStart(..) => self.stack.push(Frame::Seq { path, next: 0 }),
                    _ => {}
                }
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            Event::DocumentEnd => self.done = true,
            _ => {}
        }
    }
}

impl YamlIndex {
    /// Indexes `text`; a document that does not parse gives an empty index
    /// (serde_yaml's own error reports the syntax problem).
    pub fn build(text: &str) -> YamlIndex {
        let mut builder = Builder::default();
        let mut parser = Parser::new_from_str(text);
        if parser.load(&mut builder, false).is_err() {
            return YamlIndex::default();
        }
        let mut index = builder.index;
        // Mark flow collections by looking at the source character.
        let lines: Vec<&str> = text.lines().collect();
        for node in index.nodes.values_mut() {
            let ch = lines
                .get(node.value.line.wrapping_sub(1))
                .and_then(|l| l.chars().nth(node.value.col - 1));
            match &mut node.kind {
                ValueKind::Mapping { flow } => *flow = ch == Some('{'),
                ValueKind::Sequence { flow } => *flow = ch == Some('['),
                _ => {}
            }
        }
        index
    }

    /// The line of `path`'s key (or value), falling back to its nearest
    /// ancestor that is present: a missing key is reported at its parent.
    pub fn line_of(&self, path: &str) -> Option<usize> {
        self.pos_of(path).map(|p| p.line)
    }

    /// The line and column of `path`'s key (or value), as [`Self::line_of`].
    pub fn pos_of(&self, path: &str) -> Option<Pos> {
        let mut p = path.to_string();
        loop {
            if let Some(n) = self.nodes.get(&p) {
                return Some(n.key.unwrap_or(n.value));
            }
            let cut = p.rfind(['.', '['])?;
            p.truncate(cut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_block_and_flow_nodes() {
        let text = "# comment\nbatch_size: 20\narchitecture:\n  name: \"transformer\"\n  channels: [64, 128, 256]\nenvironment: {A: b}\n";
        let idx = YamlIndex::build(text);
        let n = &idx.nodes["batch_size"];
        assert_eq!(n.key, Some(Pos { line: 2, col: 1 }));
        assert_eq!(n.value, Pos { line: 2, col: 13 });
        assert!(matches!(&n.kind, ValueKind::Scalar { text, plain: true, .. } if text == "20"));
        let name = &idx.nodes["architecture.name"];
        assert_eq!(name.value, Pos { line: 4, col: 9 });
        assert!(matches!(&name.kind, ValueKind::Scalar { plain: false, .. }));
        assert_eq!(
            idx.nodes["architecture.channels[1]"].value,
            Pos { line: 5, col: 18 }
        );
        assert!(matches!(
            idx.nodes["architecture.channels"].kind,
            ValueKind::Sequence { flow: true }
        ));
        assert!(matches!(
            idx.nodes["architecture"].kind,
            ValueKind::Mapping { flow: false }
        ));
        assert!(matches!(
            idx.nodes["environment"].kind,
            ValueKind::Mapping { flow: true }
        ));
        assert_eq!(idx.line_of("architecture.channels[2]"), Some(5));
        assert_eq!(
            idx.line_of("architecture.heads"),
            Some(3),
            "missing key: its parent's line"
        );
        assert_eq!(idx.line_of("nothing"), None);
    }

    #[test]
    fn broken_yaml_gives_an_empty_index() {
        assert!(YamlIndex::build("a: [1, 2\n").nodes.is_empty());
    }
}
