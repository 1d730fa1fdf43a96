//! One Python file's text -> the facts the hazards are judged from (a
//! compile setting that records CUDA graphs, a checkpointing call, a
//! DataLoader's workers, CUDA_LAUNCH_BLOCKING set), or "not parsed" when
//! tree-sitter marks an error in it. Pure: no file is read here.

use super::syntax::{self, clip, dotted, literal, method, text, Args, Imports, Literal};
use super::{Fact, FileScan, Site};
use crate::hazards::cuda_graphs_fix;
use common::wire::config::CompileMode;
use serde::de::IntoDeserializer;
use serde::Deserialize;
use tree_sitter::{Node, Parser};

const TORCH_COMPILE: &str = "torch.compile";
const CHECKPOINT: &str = "torch.utils.checkpoint.checkpoint";
const CHECKPOINT_SEQUENTIAL: &str = "torch.utils.checkpoint.checkpoint_sequential";
const ENVIRON: &str = "os.environ";
const SETDEFAULT: &str = "os.environ.setdefault";
const UPDATE: &str = "os.environ.update";
const PUTENV: &str = "os.putenv";
/// The names a `from m import *` can bring that the rules look for.
const KNOWN: &[&str] = &[
    TORCH_COMPILE,
    CHECKPOINT,
    CHECKPOINT_SEQUENTIAL,
    ENVIRON,
    SETDEFAULT,
    UPDATE,
    PUTENV,
];
const LAUNCH_BLOCKING: &str = "CUDA_LAUNCH_BLOCKING";
/// Characters of an expression quoted in a message.
const EXPR_CHARS: usize = 60;

/// A parser for Python 3 (tree-sitter-python's grammar).
pub fn parser() -> anyhow::Result<Parser> {
    let mut p = Parser::new();
    p.set_language(&tree_sitter_python::LANGUAGE.into())
        .map_err(|e| anyhow::anyhow!("tree-sitter cannot load the Python grammar: {e}"))?;
    Ok(p)
}

/// The facts in one file's bytes, or why it was not parsed (not UTF-8, a
/// syntax error).
pub fn scan(parser: &mut Parser, bytes: &[u8]) -> FileScan {
    let src = match std::str::from_utf8(bytes) {
        Ok(s) => s.as_bytes(),
        Err(e) => {
            return FileScan::NotParsed {
                line: Some(bytes[..e.valid_up_to()].split(|b| *b == b'\n').count()),
                reason: format!("not UTF-8 (invalid byte at offset {})", e.valid_up_to()),
            }
        }
    };
    let Some(tree) = parser.parse(src, None) else {
        return FileScan::NotParsed {
            line: None,
            reason: "the parser gave up on it".into(),
        };
    };
    let root = tree.root_node();
    if root.has_error() {
        return FileScan::NotParsed {
            line: first_error(root).map(|n| n.start_position().row + 1),
            reason: "syntax error (the parser marked errors from this line)".into(),
        };
    }
    let mut file = File {
        src,
        imports: Imports::default(),
        facts: vec![],
    };
    // One walk, with an explicit stack (deep nesting cannot overflow ours):
    // imports are gathered first, calls and assignments judged after, so an
    // import below its use still counts.
    let mut calls = vec![];
    let mut assigns = vec![];
    let mut decorators = vec![];
    let mut stack = vec![(root, false)];
    let mut cursor = root.walk();
    while let Some((node, conditional)) = stack.pop() {
        match node.kind() {
            "import_statement" | "import_from_statement" => file.imports.add(node, src),
            "call" => calls.push((node, conditional)),
            "assignment" => assigns.push((node, conditional)),
            "decorator" => decorators.push(node),
            _ => {}
        }
        // Code under an `if` (but a script's main guard), a `match` or a
        // conditional expression may not run on every run.
        let inner = conditional
            || match node.kind() {
                "if_statement" => !syntax::is_main_guard(node, src),
                "match_statement" | "conditional_expression" => true,
                _ => false,
            };
        let at = stack.len();
        stack.extend(node.named_children(&mut cursor).map(|c| (c, inner)));
        stack[at..].reverse();
    }
    for (call, conditional) in calls {
        file.call(call, conditional);
    }
    for (assign, conditional) in assigns {
        file.assignment(assign, conditional);
    }
    for d in decorators {
        file.decorator(d);
    }
    let twice = super::traversals::facts(root, src, &|call| file.is_checkpoint(call), &|n| {
        file.site(n)
    });
    file.facts.extend(twice);
    FileScan::Parsed(file.facts)
}

/// Whether a file's code checkpoints activations: it calls torch's
/// checkpoint (or a model's gradient_checkpointing_enable), or imports
/// torch.utils.checkpoint (`import torch.utils.checkpoint`, `from
/// torch.utils.checkpoint import checkpoint`). False for a file that does
/// not parse.
pub fn checkpoints_activations(bytes: &[u8]) -> bool {
    let Ok(mut p) = parser() else {
        return false;
    };
    let facts = match scan(&mut p, bytes) {
        FileScan::Parsed(facts) => facts,
        FileScan::NotParsed { .. } => return false,
    };
    if facts
        .iter()
        .any(|f| matches!(f, Fact::Checkpointing { .. }))
    {
        return true;
    }
    let Some(tree) = p.parse(bytes, None) else {
        return false;
    };
    let (module, root) = ("torch.utils.checkpoint", tree.root_node());
    let mut imports = Imports::default();
    let mut plain = false;
    let mut stack = vec![root];
    let mut cursor = root.walk();
    while let Some(node) = stack.pop() {
        match node.kind() {
            "import_from_statement" => imports.add(node, bytes),
            "import_statement" => {
                imports.add(node, bytes);
                // `import torch.utils.checkpoint` binds `torch` alone.
                plain |= node
                    .children_by_field_name("name", &mut node.walk())
                    .any(|n| text(n, bytes).replace(' ', "") == module);
            }
            _ => stack.extend(node.named_children(&mut cursor)),
        }
    }
    plain || imports.binds_from(module)
}

/// The first ERROR or MISSING node, in source order.
fn first_error(root: Node) -> Option<Node> {
    let mut stack = vec![root];
    let mut cursor = root.walk();
    while let Some(n) = stack.pop() {
        if n.is_error() || n.is_missing() {
            return Some(n);
        }
        if n.has_error() {
            let at = stack.len();
            stack.extend(n.children(&mut cursor));
            stack[at..].reverse();
        }
    }
    None
}

struct File<'s> {
    src: &'s [u8],
    imports: Imports,
    facts: Vec<Fact>,
}

impl File<'_> {
    /// The node's line and column, and that line's text (found around the
    /// node, so a file with many facts is not read again for each). The
    /// column counts characters, as editors and SARIF's
    /// `unicodeCodePoints` do, not tree-sitter's bytes.
    fn site(&self, node: Node) -> Site {
        let at = node.start_byte().min(self.src.len());
        let start = self.src[..at]
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let end = self.src[at..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(self.src.len(), |i| at + i);
        let line = String::from_utf8_lossy(&self.src[start..end]);
        Site {
            line: node.start_position().row + 1,
            col: String::from_utf8_lossy(&self.src[start..at])
                .chars()
                .count()
                + 1,
            code: clip(line.trim(), 120),
        }
    }

    /// A call of torch's checkpoint (either function), under the file's
    /// imports.
    fn is_checkpoint(&self, call: Node) -> bool {
        call.child_by_field_name("function")
            .and_then(|c| dotted(c, self.src))
            .map(|p| self.imports.resolve(&p, KNOWN).0)
            .is_some_and(|n| n == CHECKPOINT || n == CHECKPOINT_SEQUENTIAL)
    }

    /// A bare `@torch.compile` (with arguments it is a call, seen there).
    fn decorator(&mut self, decorator: Node) {
        let Some(expr) = decorator.named_child(0) else {
            return;
        };
        let name = dotted(expr, self.src).map(|p| self.imports.resolve(&p, KNOWN).0);
        if name.as_deref() == Some(TORCH_COMPILE) {
            self.facts.push(Fact::Compiled {
                at: self.site(decorator),
                what: "@torch.compile".into(),
            });
        }
    }

    fn expr(&self, node: Node) -> String {
        clip(text(node, self.src), EXPR_CHARS)
    }

    fn call(&mut self, call: Node, conditional: bool) {
        let Some(callee) = call.child_by_field_name("function") else {
            return;
        };
        let src = self.src;
        let path = dotted(callee, src);
        let (name, imported) = match &path {
            Some(p) => self.imports.resolve(p, KNOWN),
            None => (String::new(), false),
        };
        let last = path.as_ref().and_then(|p| p.last().copied());
        let args = Args::of(call, src);
        if name == TORCH_COMPILE {
            self.compile(call, &args, "torch.compile");
        } else if method(callee, src) == Some("compile") && !imported {
            // nn.Module.compile takes torch.compile's arguments; re.compile
            // and friends are called on an imported module and have no mode.
            let shown = clip(text(callee, src), 40);
            self.compile(call, &args, &shown);
        }
        if name == CHECKPOINT || name == CHECKPOINT_SEQUENTIAL {
            self.facts.push(Fact::Checkpointing {
                at: self.site(call),
                what: name.clone(),
            });
        }
        if method(callee, src) == Some("gradient_checkpointing_enable") {
            self.facts.push(Fact::Checkpointing {
                at: self.site(call),
                what: ".gradient_checkpointing_enable()".into(),
            });
        }
        if let Some(last) = last {
            if last.ends_with("TrainingArguments") || last.ends_with("Config") {
                self.training_arguments(&args, last);
            }
            if last == "DataLoader" {
                // num_workers is DataLoader's sixth parameter.
                let value = args
                    .get("num_workers")
                    .or(args.positional.get(5).map(|v| (*v, *v)));
                self.workers(value, args.splat, "num_workers=0 in this DataLoader", call);
            }
        }
        if !conditional {
            self.launch_blocking_call(&name, &args, call);
        }
    }

    /// torch.compile(...) or model.compile(...): a mode, options or backend
    /// that records CUDA graphs, or one the code does not say.
    fn compile(&mut self, call: Node, args: &Args, callee: &str) {
        let src = self.src;
        self.facts.push(Fact::Compiled {
            at: self.site(call),
            what: callee.to_string(),
        });
        let fix_off = format!("remove this {callee} call");
        if let Some((v, arg)) = args.get("backend") {
            if literal(v, src) == Some(Literal::Str("cudagraphs".into())) {
                self.facts.push(Fact::CudaGraphs {
                    at: self.site(arg),
                    setting: format!("{callee} backend \"cudagraphs\""),
                    fix: cuda_graphs_fix(
                        &format!("backend=\"inductor\" in this {callee} call"),
                        &fix_off,
                    ),
                });
            }
        }
        let mut told = false;
        if let Some((v, arg)) = args.get("mode") {
            told = true;
            match literal(v, src) {
                Some(Literal::Str(m)) => {
                    if cuda_graph_mode(&m) {
                        self.facts.push(Fact::CudaGraphs {
                            at: self.site(arg),
                            setting: format!("{callee} mode \"{m}\""),
                            fix: cuda_graphs_fix(
                                &format!("mode=\"default\" in this {callee} call"),
                                &fix_off,
                            ),
                        });
                    }
                }
                Some(_) => {}
                None => self.facts.push(Fact::CompileUnknown {
                    at: self.site(arg),
                    why: format!(
                        "the {callee} mode is {}, not a string in the code",
                        self.expr(v)
                    ),
                }),
            }
        }
        if let Some((v, arg)) = args.get("options") {
            told = true;
            self.compile_options(v, arg, callee, &fix_off);
        }
        if !told && args.splat {
            self.facts.push(Fact::CompileUnknown {
                at: self.site(call),
                why: format!("the {callee} settings come from *args or **kwargs"),
            });
        }
    }

    /// options={"triton.cudagraphs": True}.
    fn compile_options(&mut self, v: Node, arg: Node, callee: &str, fix_off: &str) {
        let src = self.src;
        if literal(v, src) == Some(Literal::None) {
            return;
        }
        if v.kind() != "dictionary" {
            self.facts.push(Fact::CompileUnknown {
                at: self.site(arg),
                why: format!(
                    "the {callee} options are {}, not a dict in the code",
                    self.expr(v)
                ),
            });
            return;
        }
        let mut cursor = v.walk();
        for pair in v.named_children(&mut cursor) {
            if pair.kind() == "dictionary_splat" {
                self.facts.push(Fact::CompileUnknown {
                    at: self.site(pair),
                    why: format!("the {callee} options take {}", self.expr(pair)),
                });
                continue;
            }
            let (Some(k), Some(val)) = (
                pair.child_by_field_name("key"),
                pair.child_by_field_name("value"),
            ) else {
                continue;
            };
            if literal(k, src) != Some(Literal::Str("triton.cudagraphs".into())) {
                continue;
            }
            match literal(val, src) {
                Some(Literal::Bool(true)) => self.facts.push(Fact::CudaGraphs {
                    at: self.site(pair),
                    setting: format!("{callee} option \"triton.cudagraphs\": True"),
                    fix: cuda_graphs_fix(
                        &format!("\"triton.cudagraphs\": False in this {callee} call's options"),
                        fix_off,
                    ),
                }),
                Some(_) => {}
                None => self.facts.push(Fact::CompileUnknown {
                    at: self.site(pair),
                    why: format!(
                        "the {callee} option \"triton.cudagraphs\" is {}, not True or False in the code",
                        self.expr(val)
                    ),
                }),
            }
        }
    }

    /// Hugging Face's TrainingArguments (and the TRL configs built on it):
    /// torch_compile_mode, gradient_checkpointing, dataloader_num_workers.
    fn training_arguments(&mut self, args: &Args, callee: &str) {
        let src = self.src;
        if let Some((v, arg)) = args.get("torch_compile_mode") {
            match literal(v, src) {
                Some(Literal::Str(m)) if cuda_graph_mode(&m) => self.facts.push(Fact::CudaGraphs {
                    at: self.site(arg),
                    setting: format!("{callee} torch_compile_mode \"{m}\""),
                    fix: cuda_graphs_fix(
                        &format!("torch_compile_mode=\"default\" in this {callee}"),
                        "remove torch_compile_mode and torch_compile=True",
                    ),
                }),
                Some(_) => {}
                None => self.facts.push(Fact::CompileUnknown {
                    at: self.site(arg),
                    why: format!(
                        "{callee}'s torch_compile_mode is {}, not a string in the code",
                        self.expr(v)
                    ),
                }),
            }
        }
        if let Some((v, arg)) = args.get("gradient_checkpointing") {
            match literal(v, src) {
                Some(Literal::Bool(true)) => self.facts.push(Fact::Checkpointing {
                    at: self.site(arg),
                    what: format!("{callee}(gradient_checkpointing=True)"),
                }),
                Some(_) => {}
                None => self.facts.push(Fact::CheckpointingUnknown {
                    at: self.site(arg),
                    why: format!(
                        "{callee}'s gradient_checkpointing is {}, not True or False in the code",
                        self.expr(v)
                    ),
                }),
            }
        }
        if let Some((v, arg)) = args.get("dataloader_num_workers") {
            self.workers(
                Some((v, arg)),
                false,
                &format!("dataloader_num_workers=0 in this {callee}"),
                arg,
            );
        }
    }

    /// A DataLoader's worker count: a number, or one the code does not say.
    fn workers(&mut self, value: Option<(Node, Node)>, splat: bool, setting: &str, call: Node) {
        match value {
            Some((v, arg)) => match literal(v, self.src) {
                Some(Literal::Int(n)) => self.facts.push(Fact::Workers {
                    at: self.site(arg),
                    workers: n,
                    setting: setting.into(),
                }),
                Some(_) => {}
                None => self.facts.push(Fact::WorkersUnknown {
                    at: self.site(arg),
                    why: format!(
                        "the worker count is {}, not a number in the code",
                        self.expr(v)
                    ),
                }),
            },
            None if splat => self.facts.push(Fact::WorkersUnknown {
                at: self.site(call),
                why: "the DataLoader's settings come from *args or **kwargs".into(),
            }),
            None => {}
        }
    }

    /// os.environ.setdefault / os.putenv / os.environ.update setting
    /// CUDA_LAUNCH_BLOCKING to "1".
    fn launch_blocking_call(&mut self, name: &str, args: &Args, call: Node) {
        let src = self.src;
        let is = |n: Option<&Node>, want: &str| {
            n.and_then(|n| literal(*n, src))
                .is_some_and(|l| matches!(l, Literal::Str(s) if s.trim() == want))
        };
        let set = match name {
            SETDEFAULT | PUTENV => {
                is(args.positional.first(), LAUNCH_BLOCKING) && is(args.positional.get(1), "1")
            }
            UPDATE => {
                let kw = args
                    .get(LAUNCH_BLOCKING)
                    .is_some_and(|(v, _)| is(Some(&v), "1"));
                let dict = args.positional.first().is_some_and(|d| {
                    let mut cursor = d.walk();
                    d.kind() == "dictionary"
                        && d.named_children(&mut cursor).any(|p| {
                            is(p.child_by_field_name("key").as_ref(), LAUNCH_BLOCKING)
                                && is(p.child_by_field_name("value").as_ref(), "1")
                        })
                });
                kw || dict
            }
            _ => false,
        };
        if set {
            let how = format!("{name}(...)");
            self.facts.push(Fact::LaunchBlocking {
                at: self.site(call),
                how,
            });
        }
    }

    /// os.environ["CUDA_LAUNCH_BLOCKING"] = "1".
    fn assignment(&mut self, assign: Node, conditional: bool) {
        let src = self.src;
        let (Some(left), Some(right)) = (
            assign.child_by_field_name("left"),
            assign.child_by_field_name("right"),
        ) else {
            return;
        };
        if conditional || left.kind() != "subscript" {
            return;
        }
        let target = left
            .child_by_field_name("value")
            .and_then(|v| dotted(v, src))
            .map(|p| self.imports.resolve(&p, KNOWN).0);
        let key = left
            .child_by_field_name("subscript")
            .and_then(|k| literal(k, src));
        let value = literal(right, src);
        if target.as_deref() == Some(ENVIRON)
            && key == Some(Literal::Str(LAUNCH_BLOCKING.into()))
            && matches!(&value, Some(Literal::Str(v)) if v.trim() == "1")
        {
            self.facts.push(Fact::LaunchBlocking {
                at: self.site(assign),
                how: "os.environ[...] = \"1\"".into(),
            });
        }
    }
}

/// Whether a compile mode's name is one that records CUDA graphs (the
/// config schema's own list: reduce-overhead, max-autotune).
fn cuda_graph_mode(mode: &str) -> bool {
    let de: serde::de::value::StrDeserializer<serde::de::value::Error> = mode.into_deserializer();
    CompileMode::deserialize(de).is_ok_and(CompileMode::uses_cuda_graphs)
}
