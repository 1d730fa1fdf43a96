//! The scanner on the ways people write each half of a hazard, and the
//! judge on trees of them.

use super::*;

fn scan_text(text: &str) -> FileScan {
    scan(&mut parser().unwrap(), text.as_bytes())
}

fn facts(text: &str) -> Vec<Fact> {
    match scan_text(text) {
        FileScan::Parsed(f) => f,
        other => panic!("not parsed: {other:?}\n{text}"),
    }
}

/// The facts as short tags: the kind, and the line.
fn tags(text: &str) -> Vec<String> {
    facts(text)
        .iter()
        .filter_map(|f| {
            let (kind, at) = match f {
                Fact::CudaGraphs { at, .. } => ("graphs", at),
                Fact::CompileUnknown { at, .. } => ("graphs?", at),
                Fact::Checkpointing { at, .. } => ("ckpt", at),
                Fact::CheckpointingUnknown { at, .. } => ("ckpt?", at),
                Fact::Workers { at, workers, .. } => {
                    return Some(format!("workers={workers}@{}", at.line))
                }
                Fact::WorkersUnknown { at, .. } => ("workers?", at),
                Fact::LaunchBlocking { at, .. } => ("blocking", at),
                Fact::CheckpointedTwice { at, .. } => ("twice", at),
                // Every compile is one: the tags of the other rules leave
                // them out (`compiled` lists them).
                Fact::Compiled { .. } => return None,
            };
            Some(format!("{kind}@{}", at.line))
        })
        .collect()
}

#[test]
fn checkpointing_under_every_import_alias() {
    let cases = [
        "import torch\ntorch.utils.checkpoint.checkpoint(f, x)",
        "import torch.utils.checkpoint\ntorch.utils.checkpoint.checkpoint(f, x)",
        "from torch.utils.checkpoint import checkpoint as ckpt\nckpt(f, x)",
        "import torch.utils.checkpoint as cp\ncp.checkpoint(f, x)",
        "from torch.utils import checkpoint\ncheckpoint.checkpoint(f, x)",
        "from torch.utils.checkpoint import checkpoint_sequential\ncheckpoint_sequential(m, 2, x)",
        "from torch.utils.checkpoint import *\ncheckpoint(f, x)",
        "import torch . utils . checkpoint as cp\ncp.checkpoint_sequential(m, 2, x)",
        "from torch.utils.checkpoint import (checkpoint as ck,)\nck(f, x)",
        "x\nmodel.gradient_checkpointing_enable()",
        "x\nget_model().gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})",
    ];
    for c in cases {
        assert_eq!(tags(c), ["ckpt@2"], "{c}");
    }
    // Imported after its use (inside a function, or at the bottom).
    assert_eq!(
        tags("def f(x):\n    return cp.checkpoint(g, x)\nimport torch.utils.checkpoint as cp"),
        ["ckpt@2"]
    );
    // Not torch's checkpoint: the user's own, a comment, a string, a save.
    for c in [
        "checkpoint(f, x)",
        "from mylib import checkpoint\ncheckpoint(f, x)",
        "# torch.utils.checkpoint.checkpoint(f, x)\n",
        "s = 'torch.utils.checkpoint.checkpoint(f, x)'",
        "import torch\ntorch.save(model.state_dict(), 'checkpoint.pt')",
        "from torch.utils.checkpoint import checkpoint",
    ] {
        assert!(tags(c).is_empty(), "{c}: {:?}", tags(c));
    }
}

#[test]
fn compile_modes_options_and_backends() {
    let graphs = [
        "import torch\nm = torch.compile(m, mode='reduce-overhead')",
        "import torch as t\nm = t.compile(m, mode=\"max-autotune\")",
        "from torch import compile\nm = compile(m, mode='max-autotune')",
        "import torch\nm = torch.compile(m, mode='reduce-' 'overhead')",
        "import torch\nm = torch.compile(m, mode=('reduce-overhead'))",
        "import torch\nm = torch.compile(m, options={'triton.cudagraphs': True})",
        "import torch\nm = torch.compile(m, backend='cudagraphs')",
        "x\nmodel.compile(mode='reduce-overhead')",
        "import torch\n@torch.compile(mode='reduce-overhead')\ndef f(x):\n    return x",
    ];
    for c in graphs {
        assert_eq!(tags(c), ["graphs@2"], "{c}");
    }
    // A module's own compile is named as written.
    let graphs = facts("x\nself.net.compile(mode='max-autotune')");
    match graphs.iter().find(|f| matches!(f, Fact::CudaGraphs { .. })) {
        Some(Fact::CudaGraphs { setting, fix, .. }) => {
            assert_eq!(setting, "self.net.compile mode \"max-autotune\"");
            assert!(fix.contains("in this self.net.compile call"), "{fix}");
        }
        other => panic!("{other:?}"),
    }
    // The mode's line, for a call over several lines.
    assert_eq!(
        tags("import torch\nm = torch.compile(\n    m,\n    mode='max-autotune',\n)"),
        ["graphs@4"]
    );
    let none = [
        "import torch\nm = torch.compile(m)",
        "import torch\nm = torch.compile(m, mode='default')",
        "import torch\nm = torch.compile(m, mode='max-autotune-no-cudagraphs')",
        "import torch\nm = torch.compile(m, mode=None)",
        "import torch\nm = torch.compile(m, options={'triton.cudagraphs': False})",
        "import torch\nm = torch.compile(m, options={'max_autotune': True})",
        "import re\np = re.compile('reduce-overhead')",
        "s = \"torch.compile(m, mode='reduce-overhead')\"",
        "import torch\nm = torch.compile(m, mode=b'reduce-overhead')",
    ];
    for c in none {
        assert!(tags(c).is_empty(), "{c}: {:?}", tags(c));
    }
    let unknown = [
        "import torch\nm = torch.compile(m, mode=args.mode)",
        "import torch\nm = torch.compile(m, mode=MODE)",
        "import torch\nm = torch.compile(m, mode=f'{kind}')",
        "import torch\nm = torch.compile(m, **compile_kwargs)",
        "import torch\nm = torch.compile(m, options=opts)",
        "import torch\nm = torch.compile(m, options={'triton.cudagraphs': flag})",
        "x\nmodel.compile(mode=cfg.mode)",
    ];
    for c in unknown {
        assert_eq!(tags(c), ["graphs?@2"], "{c}");
    }
}

#[test]
fn hugging_face_training_arguments() {
    let t = "from transformers import TrainingArguments\nargs = TrainingArguments(\n    output_dir='o',\n    torch_compile_mode='reduce-overhead',\n    gradient_checkpointing=True,\n    dataloader_num_workers=2,\n)";
    assert_eq!(tags(t), ["graphs@4", "ckpt@5", "workers=2@6"]);
    for callee in [
        "Seq2SeqTrainingArguments",
        "transformers.TrainingArguments",
        "SFTConfig",
    ] {
        let c = format!("x\nargs = {callee}(output_dir='o', torch_compile_mode='max-autotune', gradient_checkpointing=True)");
        assert_eq!(tags(&c), ["graphs@2", "ckpt@2"], "{c}");
    }
    assert_eq!(
        tags("x\nTrainingArguments(torch_compile_mode=mode, gradient_checkpointing=cfg.gc)"),
        ["graphs?@2", "ckpt?@2"]
    );
    assert!(tags(
        "x\nTrainingArguments(torch_compile_mode='default', gradient_checkpointing=False)"
    )
    .is_empty());
    // The keywords in some other call are not Hugging Face's.
    assert!(
        tags("x\nbuild(torch_compile_mode='max-autotune', gradient_checkpointing=True)").is_empty()
    );
}

#[test]
fn dataloader_workers() {
    let from = "from torch.utils.data import DataLoader\n";
    assert_eq!(
        tags(&format!(
            "{from}DataLoader(ds, batch_size=8, num_workers=4)"
        )),
        ["workers=4@2"]
    );
    assert_eq!(
        tags(&format!("{from}DataLoader(ds, 8, True, None, None, 2)")),
        ["workers=2@2"]
    );
    assert_eq!(
        tags(&format!("{from}DataLoader(ds, num_workers=0x10)")),
        ["workers=16@2"]
    );
    assert_eq!(
        tags(&format!("{from}DataLoader(ds, num_workers=0)")),
        ["workers=0@2"]
    );
    assert_eq!(
        tags(&format!("{from}DataLoader(ds, num_workers=os.cpu_count())")),
        ["workers?@2"]
    );
    assert_eq!(
        tags(&format!("{from}DataLoader(ds, **loader_kwargs)")),
        ["workers?@2"]
    );
    assert!(tags(&format!("{from}DataLoader(ds, batch_size=8)")).is_empty());
    assert_eq!(
        tags("import torch.utils.data as d\nd.DataLoader(ds, num_workers=3)"),
        ["workers=3@2"]
    );
}

#[test]
fn launch_blocking_set_for_every_run() {
    let set = [
        "import os\nos.environ['CUDA_LAUNCH_BLOCKING'] = '1'",
        "from os import environ\nenviron['CUDA_LAUNCH_BLOCKING'] = \"1\"",
        "import os\nos.environ.setdefault('CUDA_LAUNCH_BLOCKING', '1')",
        "import os\nos.putenv('CUDA_LAUNCH_BLOCKING', '1')",
        "import os\nos.environ.update(CUDA_LAUNCH_BLOCKING='1')",
        "import os\nos.environ.update({'CUDA_LAUNCH_BLOCKING': '1', 'X': '2'})",
        "import os\nif __name__ == '__main__':\n    os.environ['CUDA_LAUNCH_BLOCKING'] = '1'",
    ];
    for c in set {
        assert_eq!(tags(c).len(), 1, "{c}");
        assert!(tags(c)[0].starts_with("blocking@"), "{c}");
    }
    let not = [
        "import os\nos.environ['CUDA_LAUNCH_BLOCKING'] = '0'",
        "import os\nif args.debug:\n    os.environ['CUDA_LAUNCH_BLOCKING'] = '1'",
        "import os\nif a:\n    pass\nelse:\n    os.environ.setdefault('CUDA_LAUNCH_BLOCKING', '1')",
        "import os\nv = os.environ['CUDA_LAUNCH_BLOCKING']",
        "import os\nos.environ['OTHER'] = '1'",
        "print('set CUDA_LAUNCH_BLOCKING=1 to debug')",
    ];
    for c in not {
        assert!(tags(c).is_empty(), "{c}: {:?}", tags(c));
    }
}

#[test]
fn columns_count_characters_from_one() {
    // "é" and "→" are 2 and 3 bytes: the column counts them as one each.
    let text = "import torch\nm = torch.compile(model, mode=\"reduce-overhead\")  # x\ns = \"é→\"; n = torch.compile(model, mode=\"max-autotune\")\n";
    let cols: Vec<(usize, usize)> = facts(text)
        .iter()
        .filter_map(|f| match f {
            Fact::CudaGraphs { at, .. } => Some((at.line, at.col)),
            _ => None,
        })
        .collect();
    assert_eq!(cols, [(2, 26), (3, 36)]);
}

#[test]
fn files_with_errors_are_not_parsed() {
    for (text, line) in [
        ("import torch\n\ndef f(x:\n    return x\n", Some(3)),
        ("x = = 1\n", Some(1)),
        ("x = (1,\n", Some(1)),
    ] {
        match scan_text(text) {
            FileScan::NotParsed { line: l, reason } => {
                assert!(reason.contains("syntax error"), "{reason}");
                assert_eq!(l.map(|l| l.min(3)), line, "{text:?}");
            }
            other => panic!("{text:?} parsed: {other:?}"),
        }
    }
    match scan(&mut parser().unwrap(), b"x = 1\ny = '\xff'\n") {
        FileScan::NotParsed { line, reason } => {
            assert_eq!(line, Some(2));
            assert!(reason.contains("not UTF-8"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(scan_text(""), FileScan::Parsed(vec![]));
}

fn scanned(file: &str, text: &str) -> Scanned {
    Scanned {
        file: file.into(),
        scan: scan_text(text),
    }
}

#[test]
fn the_judge_pairs_halves_across_files() {
    let compile = scanned(
        "train.py",
        "import torch\n\nm = torch.compile(m, mode='reduce-overhead')\n",
    );
    let ckpt = scanned(
        "model.py",
        "from torch.utils.checkpoint import checkpoint as ckpt\n\n\ndef f(x):\n    return ckpt(g, x)\n",
    );
    let out = judge(vec![".".into()], &[compile.clone(), ckpt.clone()], None);
    assert_eq!(out.verdict, "errors");
    assert_eq!(out.findings.len(), 1);
    let f = &out.findings[0];
    assert_eq!(f.id, HazardId::CudaGraphsCheckpointing);
    assert_eq!(f.severity, Severity::Error);
    let places: Vec<(&str, usize)> = f
        .evidence
        .iter()
        .map(|e| (e.file.as_str(), e.line))
        .collect();
    assert_eq!(places, [("train.py", 3), ("model.py", 5)]);
    assert!(
        f.message
            .starts_with("torch.compile mode \"reduce-overhead\" records CUDA graphs"),
        "{}",
        f.message
    );
    assert!(f.fix.contains("mode=\"default\""), "{}", f.fix);
    // The config rule says the same, in its own words for where it lives.
    assert!(f
        .message
        .ends_with(&crate::hazards::cuda_graphs_message("")[1..]));
    // One half alone is nothing.
    for one in [&compile, &ckpt] {
        let out = judge(vec![".".into()], std::slice::from_ref(one), None);
        assert!(
            out.findings.is_empty() && out.cannot_tell.is_empty(),
            "{out:?}"
        );
        assert_eq!(out.verdict, "ok");
    }
    // The checkpointing in the compile's own file is the one shown.
    let both = scanned(
        "both.py",
        "import torch\nimport torch.utils.checkpoint as cp\ny = cp.checkpoint(f, x)\nm = torch.compile(m, mode='max-autotune')\n",
    );
    let out = judge(vec![".".into()], &[ckpt.clone(), both], None);
    let e = &out.findings[0].evidence;
    assert_eq!((e[1].file.as_str(), e[1].line), ("both.py", 3));
    assert!(e[1].what.contains("1 more place"), "{}", e[1].what);
}

#[test]
fn the_judge_says_what_it_cannot_tell_only_beside_a_certain_half() {
    let var = scanned(
        "train.py",
        "import torch\nm = torch.compile(m, mode=args.mode)\n",
    );
    let ckpt = scanned("model.py", "x\nmodel.gradient_checkpointing_enable()\n");
    let out = judge(vec![".".into()], &[var.clone(), ckpt], None);
    assert!(out.findings.is_empty());
    assert_eq!(out.verdict, "ok");
    assert_eq!(out.cannot_tell.len(), 1);
    let c = &out.cannot_tell[0];
    assert_eq!(
        (c.file.as_str(), c.line, c.severity),
        ("train.py", 2, Severity::Info)
    );
    assert!(
        c.why.contains("args.mode") && c.why.contains("model.py:2"),
        "{}",
        c.why
    );
    let out = judge(vec![".".into()], &[var], None);
    assert!(out.cannot_tell.is_empty());
}

#[test]
fn the_judge_applies_the_host_rule_by_its_threshold() {
    let loader = scanned(
        "data.py",
        "from torch.utils.data import DataLoader\nl = DataLoader(ds, num_workers=2)\nk = DataLoader(ds, num_workers=n)\nz = DataLoader(ds, num_workers=0)\n",
    );
    let small = judge(
        vec![".".into()],
        std::slice::from_ref(&loader),
        Some(12 * 1024),
    );
    assert_eq!(small.verdict, "warnings");
    assert_eq!(small.findings.len(), 1);
    assert_eq!(small.findings[0].id, HazardId::WorkersSmallHost);
    assert_eq!(small.findings[0].evidence[0].line, 2);
    assert!(
        small.findings[0].fix.contains("num_workers=0"),
        "{}",
        small.findings[0].fix
    );
    assert_eq!(small.cannot_tell.len(), 1);
    assert_eq!(small.cannot_tell[0].line, 3);
    let large = judge(
        vec![".".into()],
        std::slice::from_ref(&loader),
        Some(64 * 1024),
    );
    assert!(large.findings.is_empty() && large.cannot_tell.is_empty());
    let unknown = judge(vec![".".into()], std::slice::from_ref(&loader), None);
    assert!(unknown.findings.is_empty());
    assert_eq!(unknown.skipped[0].rules, [HazardId::WorkersSmallHost]);
}

#[test]
fn not_parsed_files_are_counted_and_said() {
    let out = judge(
        vec![".".into()],
        &[scanned("a.py", "x = 1\n"), scanned("b.py", "def f(:\n")],
        None,
    );
    assert_eq!(
        (out.files.scanned, out.files.parsed, out.files.not_parsed),
        (2, 1, 1)
    );
    assert_eq!(out.not_parsed[0].file, "b.py");
    assert_eq!(out.not_parsed[0].line, Some(1));
}

/// The same checkpointed blocks run twice in a function: (line, blocks).
fn twice(text: &str) -> Vec<(usize, String)> {
    facts(text)
        .into_iter()
        .filter_map(|f| match f {
            Fact::CheckpointedTwice { at, blocks, .. } => Some((at.line, blocks)),
            _ => None,
        })
        .collect()
}

const HEAD: &str = "import torch\nfrom torch.utils.checkpoint import checkpoint\n";

#[test]
fn the_same_checkpointed_blocks_run_twice_are_found() {
    // pytorch#193193's shape (CoCa's text tower): the same blocks, once
    // without cross-attention context, once with.
    let coca = format!("{HEAD}class Tower:\n    def forward(self, x, ctx):\n        h = x\n        for blk in self.blocks:\n            h = checkpoint(blk, h, None, use_reentrant=False)\n        y = x\n        for blk in self.blocks:\n            y = checkpoint(blk, y, ctx, use_reentrant=False)\n        return h, y\n");
    assert_eq!(twice(&coca), [(9, "self.blocks".to_string())]);
    match facts(&coca).last() {
        Some(Fact::CheckpointedTwice { how, .. }) => {
            assert_eq!(how, "2 loops over self.blocks (lines 6 and 9) in forward()")
        }
        other => panic!("{other:?}"),
    }
    // Through a helper of the same file, called twice; enumerate() and
    // a lambda around the block are the same traversal.
    let helper = format!("{HEAD}class Tower:\n    def run(self, x, ctx=None):\n        for i, blk in enumerate(self.blocks):\n            x = checkpoint(lambda t: blk(t, ctx), x, use_reentrant=False)\n        return x\n    def forward(self, x, ctx):\n        return self.run(x), self.run(x, ctx)\n");
    assert_eq!(twice(&helper), [(9, "self.blocks".to_string())]);
    // A traversal inside another loop; one block checkpointed twice, or
    // in a loop (weights shared across steps).
    let cases = [
        format!("{HEAD}def f(blocks, x):\n    for _ in range(2):\n        for b in blocks:\n            x = checkpoint(b, x)\n    return x\n"),
        format!("{HEAD}def f(self, x):\n    x = checkpoint(self.block, x)\n    x = checkpoint(self.block, x)\n    return x\n"),
        format!("{HEAD}def f(self, x):\n    for _ in range(4):\n        x = checkpoint(self.block, x)\n    return x\n"),
        format!("{HEAD}def f(self, x):\n    for step in range(4):\n        x = self.run(x)\n    return x\ndef run(self, x):\n    for b in self.blocks:\n        x = checkpoint(b, x)\n    return x\n"),
    ];
    for c in &cases {
        assert_eq!(twice(c).len(), 1, "{c}");
    }
}

#[test]
fn one_traversal_or_other_blocks_are_not_twice() {
    let cases = [
        // One traversal (the usual per-block checkpointing).
        format!("{HEAD}def f(self, x):\n    for b in self.blocks:\n        x = checkpoint(b, x)\n    return x\n"),
        // Two stacks, each once.
        format!("{HEAD}def f(self, x):\n    for b in self.encoder:\n        x = checkpoint(b, x)\n    for b in self.decoder:\n        x = checkpoint(b, x)\n    return x\n"),
        // One branch or the other runs.
        format!("{HEAD}def f(self, x, ctx):\n    if ctx is None:\n        for b in self.blocks:\n            x = checkpoint(b, x)\n    else:\n        for b in self.blocks:\n            x = checkpoint(b, x, ctx)\n    return x\n"),
        // The second traversal is not checkpointed.
        format!("{HEAD}def f(self, x):\n    for b in self.blocks:\n        x = checkpoint(b, x)\n    for b in self.blocks:\n        x = b(x)\n    return x\n"),
        // Not torch's checkpoint.
        "from mylib import checkpoint\ndef f(self, x):\n    for b in self.blocks:\n        x = checkpoint(b, x)\n    for b in self.blocks:\n        x = checkpoint(b, x)\n".to_string(),
        // A helper called once; a loop over blocks calling it per block.
        format!("{HEAD}def run(self, x):\n    for b in self.blocks:\n        x = checkpoint(b, x)\n    return x\ndef f(self, x):\n    return self.run(x)\n"),
        format!("{HEAD}def f(self, x):\n    for b in self.blocks:\n        x = checkpoint(b, x, use_reentrant=False)\n        x = checkpoint(b.norm, x, use_reentrant=False)\n    return x\n"),
    ];
    for c in &cases {
        assert!(twice(c).is_empty(), "{c}: {:?}", twice(c));
    }
}

#[test]
fn twice_is_a_finding_only_with_a_compile_in_the_tree() {
    let model = format!("{HEAD}def f(self, x, ctx):\n    for b in self.blocks:\n        x = checkpoint(b, x)\n    for b in self.blocks:\n        x = checkpoint(b, x, ctx)\n    return x\n");
    let file = |name: &str, text: &str| Scanned {
        file: name.into(),
        scan: scan_text(text),
    };
    let alone = judge(vec!["m.py".into()], &[file("m.py", &model)], None);
    assert!(alone.findings.is_empty(), "{:?}", alone.findings);
    // Any mode compiles it, a bare decorator too; the compile may be in
    // another file.
    for train in [
        "import torch\nstep = torch.compile(model)\n",
        "import torch\n@torch.compile\ndef step(x):\n    return model(x)\n",
    ] {
        let out = judge(
            vec![".".into()],
            &[file("m.py", &model), file("train.py", train)],
            None,
        );
        assert_eq!(out.findings.len(), 1, "{train}");
        let f = &out.findings[0];
        assert_eq!(f.id, HazardId::CompiledCheckpointTwice);
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            (f.evidence[0].file.as_str(), f.evidence[0].line),
            ("m.py", 6)
        );
        assert_eq!(f.evidence[1].file, "train.py");
        assert!(f.message.contains("pytorch#193193"), "{}", f.message);
        assert!(f
            .fix
            .starts_with("call torch._dynamo.graph_break() between the two runs"));
        assert_eq!(out.verdict, "warnings");
    }
}

#[test]
fn every_compile_is_a_compile() {
    let compiled = |t: &str| -> Vec<(usize, String)> {
        facts(t)
            .into_iter()
            .filter_map(|f| match f {
                Fact::Compiled { at, what } => Some((at.line, what)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        compiled("import torch\nm = torch.compile(m)"),
        [(2, "torch.compile".to_string())]
    );
    assert_eq!(
        compiled("x\nself.net.compile()"),
        [(2, "self.net.compile".to_string())]
    );
    assert_eq!(
        compiled("import torch\n@torch.compile\ndef f(x):\n    return x"),
        [(2, "@torch.compile".to_string())]
    );
    assert!(compiled("import re\np = re.compile('x')").is_empty());
    assert!(compiled("@functools.cache\ndef f(x):\n    return x").is_empty());
}

#[test]
fn a_file_that_checkpoints_activations_by_a_call_or_an_import() {
    use super::checkpoints_activations as ckpt;
    for yes in [
        "from torch.utils.checkpoint import checkpoint\n",
        "import torch.utils.checkpoint\n",
        "import torch.utils.checkpoint as cp\n",
        "from torch.utils import checkpoint\n",
        "import torch\ndef f(m, x):\n    return torch.utils.checkpoint.checkpoint(m, x)\n",
        "model.gradient_checkpointing_enable()\n",
    ] {
        assert!(ckpt(yes.as_bytes()), "{yes}");
    }
    for no in [
        "import torch\ntorch.save(model.state_dict(), 'checkpoint.pt')\n",
        "from mylib import checkpoint\n",
        "import torch.utils.data\n",
        "# from torch.utils.checkpoint import checkpoint\n",
        "def (:\n",
    ] {
        assert!(!ckpt(no.as_bytes()), "{no}");
    }
}
