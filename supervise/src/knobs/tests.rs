//! Literal help texts and commands; the real programs' help is read in
//! tests/knobs.rs.

use super::*;
use diagnose::knobs::{Knob, Turn};

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// Cut from transformers 5's `HfArgumentParser(TrainingArguments)` help at
/// 80 columns (wrapped) and an argparse script's.
const HF: &str = "\
usage: train.py [-h] [--output_dir OUTPUT_DIR]
                [--per_device_train_batch_size PER_DEVICE_TRAIN_BATCH_SIZE]
                [--bf16 [BF16]] [--fp16 [FP16]]

options:
  -h, --help            show this help message and exit
  --output_dir OUTPUT_DIR, --output-dir OUTPUT_DIR
                        The output directory where the model predictions and
                        checkpoints will be written. (default: None)
  --per_device_train_batch_size PER_DEVICE_TRAIN_BATCH_SIZE, --per-device-train-batch-size PER_DEVICE_TRAIN_BATCH_SIZE
                        The batch size per device for training. (default: 8)
  --num_train_epochs NUM_TRAIN_EPOCHS, --num-train-epochs NUM_TRAIN_EPOCHS
                        Total number of training epochs to perform. (default:
                        3.0)
  --gradient_accumulation_steps GRADIENT_ACCUMULATION_STEPS, --gradient-accumulation-steps GRADIENT_ACCUMULATION_STEPS
                        Number of update steps to accumulate gradients before
                        performing a backward/update pass. (default: 1)
  --average_tokens_across_devices [AVERAGE_TOKENS_ACROSS_DEVICES], --average-tokens-across-devices [AVERAGE_TOKENS_ACROSS_DEVICES]
                        Reference: https://github.com/huggingface/transformers
                        /issues/34242 (default: True)
  --no_average_tokens_across_devices, --no-average-tokens-across-devices
                        Whether or not to average tokens. (default: False)
  --bf16 [BF16]         Enable bfloat16 (BF16) mixed precision training.
                        (default: False)
  --fp16 [FP16]         Enable float16 (FP16) mixed precision training.
                        (default: False)
  --gradient_checkpointing [GRADIENT_CHECKPOINTING], --gradient-checkpointing [GRADIENT_CHECKPOINTING]
                        Deprecated alias of `activation_checkpointing`, will
                        be removed in v6. (default: None)
  --torch_compile_mode TORCH_COMPILE_MODE, --torch-compile-mode TORCH_COMPILE_MODE
                        Compilation mode for `torch.compile()`. If set,
                        automatically enables `torch_compile`. (default: None)
  --resume_from_checkpoint RESUME_FROM_CHECKPOINT, --resume-from-checkpoint RESUME_FROM_CHECKPOINT
                        The path to a folder with a valid checkpoint for your
                        model. (default: None)
";

const ARGPARSE: &str = "\
usage: ap.py [-h] [--batch-size BATCH_SIZE] [--grad_accum GRAD_ACCUM]
             [--gradient-checkpointing] [--mixed_precision {no,fp16,bf16}]
             [--compile | --no-compile] [--lr LR]
             data

A raw description:
  --batch-size: not an entry, text above the sections

positional arguments:
  data

options:
  -h, --help            show this help message and exit
  --batch-size BATCH_SIZE, -b BATCH_SIZE
                        examples per step (default: 64)
  --grad_accum GRAD_ACCUM
  --gradient-checkpointing
  --mixed_precision {no,fp16,bf16}
  --compile, --no-compile
  --mode {default,reduce-overhead,max-autotune}
                        torch.compile mode (default: reduce-
                        overhead)
  --lr LR
";

fn flag<'a>(d: &'a Defined, name: &str) -> &'a Flag {
    d.get(name)
        .unwrap_or_else(|| panic!("{name} not in {d:#?}"))
}

#[test]
fn hf_entries_their_aliases_forms_and_wrapped_defaults() {
    let d = Defined::parse(HF);
    let bs = flag(&d, "--per_device_train_batch_size");
    assert_eq!(
        bs.names,
        [
            "--per_device_train_batch_size",
            "--per-device-train-batch-size"
        ]
    );
    assert_eq!(bs.form, Form::Value { choices: vec![] });
    assert_eq!(bs.default.as_deref(), Some("8"));
    assert_eq!(
        flag(&d, "--num-train-epochs").default.as_deref(),
        Some("3.0")
    );
    assert_eq!(flag(&d, "--bf16").form, Form::OptionalBool);
    assert_eq!(flag(&d, "--bf16").default.as_deref(), Some("False"));
    assert_eq!(
        flag(&d, "--average_tokens_across_devices")
            .default
            .as_deref(),
        Some("True")
    );
    assert_eq!(
        flag(&d, "--no_average_tokens_across_devices").form,
        Form::Switch { off: None }
    );
    assert_eq!(
        flag(&d, "--gradient_checkpointing").form,
        Form::OptionalBool
    );
    assert_eq!(
        flag(&d, "--gradient_checkpointing").default.as_deref(),
        Some("None")
    );
    assert!(d.get("-h").is_some() && d.get("--help").is_some());
    // The usage block lists flags too: not read as entries.
    assert_eq!(d.flags.len(), 12, "{d:#?}");
}

#[test]
fn argparse_entries_short_names_choices_negation_and_hyphen_wrap() {
    let d = Defined::parse(ARGPARSE);
    let bs = flag(&d, "-b");
    assert_eq!(bs.names, ["--batch-size", "-b"]);
    assert_eq!(bs.name(), "--batch-size");
    assert_eq!(bs.default.as_deref(), Some("64"));
    assert_eq!(flag(&d, "--grad_accum").default, None);
    assert_eq!(
        flag(&d, "--gradient-checkpointing").form,
        Form::Switch { off: None }
    );
    assert_eq!(
        flag(&d, "--mixed_precision").form,
        Form::Value {
            choices: words("no fp16 bf16")
        }
    );
    assert_eq!(
        flag(&d, "--compile").form,
        Form::Switch {
            off: Some("--no-compile".into())
        }
    );
    assert_eq!(
        flag(&d, "--mode").default.as_deref(),
        Some("reduce-overhead")
    );
    assert_eq!(d.find("batch_size").map(Flag::name), Some("--batch-size"));
    assert_eq!(
        d.find("--gradient_checkpointing").map(Flag::name),
        Some("--gradient-checkpointing")
    );
    assert!(d.get("data").is_none() && d.find("data").is_none());
    assert_eq!(d.flags.len(), 8, "{d:#?}");
}

#[test]
fn python_313_metavar_after_the_last_name_colours_and_odd_text() {
    let d = Defined::parse(
        "options:\n  \x1b[1;34m--output_dir\x1b[0m, --output-dir OUTPUT_DIR\n  --bs, -b BS\n  --tf32 TF32  x (default: None\n",
    );
    assert_eq!(
        flag(&d, "--output_dir").form,
        Form::Value { choices: vec![] }
    );
    assert_eq!(flag(&d, "--bs").names, ["--bs", "-b"]);
    assert_eq!(flag(&d, "--tf32").default, None, "unclosed: no default");
    // tests/programs/argparse_train.py's help from Python 3.13.0.
    let d = Defined::parse(
        "options:
  -h, --help            show this help message and exit
  --batch-size, -b BATCH_SIZE
                        examples per step (default: 64)
  --gradient-checkpointing
                        recompute activations (default: False)
  --compile, --no-compile
                        torch.compile the model (default: True)
  --compile_mode COMPILE_MODE
                        torch.compile's mode, one of default, reduce-overhead,
                        max-autotune: a long help that wraps at 80 columns
                        (default: max-autotune)
",
    );
    let bs = flag(&d, "-b");
    assert_eq!(
        (bs.name(), bs.default.as_deref()),
        ("--batch-size", Some("64"))
    );
    assert_eq!(bs.form, Form::Value { choices: vec![] });
    assert_eq!(
        flag(&d, "--gradient-checkpointing").default.as_deref(),
        Some("False")
    );
    assert_eq!(flag(&d, "--compile").default.as_deref(), Some("True"));
    assert_eq!(
        flag(&d, "--compile_mode").default.as_deref(),
        Some("max-autotune")
    );
    for odd in [
        "",
        "options:",
        "options:\n  -",
        "options:\n  --\n  --=x",
        "options:\n  -- x, y\n\t--z",
        "\u{1b}[",
        "options:\n  --é [É]   (default: (1, [2])) (default: (",
    ] {
        let _ = Defined::parse(odd);
    }
    assert!(Defined::parse("options:\n  --x, y X\n").is_empty());
    assert_eq!(
        Defined::parse("options:\n  --t T  (default: (1, 2))\n").flags[0]
            .default
            .as_deref(),
        Some("(1, 2)")
    );
}

#[test]
fn where_the_programs_arguments_are() {
    let r = |s: &str| {
        let w = words(s);
        let range = argv::program_args(&w);
        w[range].join(" ")
    };
    assert_eq!(r("python -u train.py --bs 8 -- --bs 9"), "--bs 8");
    assert_eq!(r("env A=1 python3 train.py --bs 8"), "--bs 8");
    assert_eq!(r("torchrun --nproc_per_node 2 train.py --bs 8"), "--bs 8");
    assert_eq!(
        r("accelerate launch --mixed_precision fp16 t.py --bs 8"),
        "--bs 8"
    );
    assert_eq!(
        r("python -m torch.distributed.run --nproc_per_node 2 t.py --bs 8"),
        "--bs 8"
    );
    assert_eq!(
        r("python -m pkg.train --bs 8 --cfg x.py"),
        "--bs 8 --cfg x.py"
    );
    assert_eq!(r("./train --bs 8"), "--bs 8");
    // A wrapper's script: flags before a `.py` value are not read (a flag
    // added after them still wins: argparse keeps the last).
    assert_eq!(r("./train --cfg x.py --bs 8"), "--bs 8");
    assert_eq!(r("uv run train.py --bs 8"), "--bs 8");
    assert_eq!(r("conda run -n x python -u -m pkg.train --bs 8"), "--bs 8");
    assert_eq!(r("python -c pass --bs 8"), "--bs 8");
    assert_eq!(r("python"), "");
    assert_eq!(r(""), "");
}

#[test]
fn the_knobs_a_command_holds_now() {
    let d = Defined::parse(HF);
    let argv = words("python train.py --per-device-train-batch-size=64 --bf16 --output_dir out");
    let f = found(&d, &argv, &[]);
    let by = |k: Knob| f.iter().find(|x| x.found.knob == k).cloned();
    let bs = by(Knob::Batch).unwrap();
    assert_eq!(bs.found.place, "--per-device-train-batch-size");
    assert_eq!(bs.found.value, Some(Scalar::Int(64)));
    assert_eq!(bs.source, Source::Command);
    assert_eq!(bs.flags, ["--per_device_train_batch_size"]);
    let acc = by(Knob::Accumulation).unwrap();
    assert_eq!(
        (acc.found.value, acc.source),
        (Some(Scalar::Int(1)), Source::Default)
    );
    let ck = by(Knob::Checkpointing).unwrap();
    assert_eq!(ck.found.value, Some(Scalar::Null));
    let p = by(Knob::Precision).unwrap();
    assert_eq!(p.found.place, "--bf16/--fp16");
    assert_eq!(p.found.value, Some(Scalar::Str("bf16".into())));
    assert_eq!(p.source, Source::Command);
    assert_eq!(
        by(Knob::CompileMode).unwrap().found.place,
        "--torch_compile_mode"
    );

    let off = found(&d, &words("python train.py --bf16 false"), &[]);
    assert_eq!(off[4].found.value, Some(Scalar::Str("no".into())));
    // After a bare `--` nothing is the program's flag.
    let after = found(
        &d,
        &words("python train.py -- --per_device_train_batch_size 2"),
        &[],
    );
    assert_eq!(after[0].found.value, Some(Scalar::Int(8)));
}

#[test]
fn the_users_name_wins_and_unknowns_stay_unknown() {
    let d = Defined::parse(ARGPARSE);
    let argv = words("python ap.py data -b 32 --mixed_precision bf16 --compile");
    let f = found(&d, &argv, &[]);
    assert_eq!(f[0].found.place, "-b");
    assert_eq!(f[0].found.value, Some(Scalar::Int(32)));
    let acc = f
        .iter()
        .find(|x| x.found.knob == Knob::Accumulation)
        .unwrap();
    assert_eq!(
        (acc.found.value.clone(), acc.source),
        (None, Source::Unknown)
    );
    let ck = f
        .iter()
        .find(|x| x.found.knob == Knob::Checkpointing)
        .unwrap();
    assert_eq!(ck.found.value, None, "a switch's default is not shown");
    let p = f.iter().find(|x| x.found.knob == Knob::Precision).unwrap();
    assert_eq!(p.found.value, Some(Scalar::Str("bf16".into())));

    let user = [
        (Knob::Batch, "grad_accum".to_string()),
        (Knob::CompileMode, "mode".into()),
    ];
    let f = found(&d, &argv, &user);
    assert_eq!(f[0].found.place, "--grad_accum");
    let mode = f
        .iter()
        .find(|x| x.found.knob == Knob::CompileMode)
        .unwrap();
    assert_eq!(
        mode.found.value,
        Some(Scalar::Str("reduce-overhead".into()))
    );
    // A name the program does not define holds nothing (no known name instead).
    let f = found(&d, &argv, &[(Knob::Batch, "bsz".into())]);
    assert!(f.iter().all(|x| x.found.knob != Knob::Batch));
}

fn t(knob: Knob, value: Scalar) -> Turn {
    Turn {
        knob,
        value,
        why: String::new(),
    }
}

#[test]
fn turns_in_the_form_written_else_added_as_the_program_expects() {
    let d = Defined::parse(HF);
    let turns = [
        t(Knob::Batch, Scalar::Int(32)),
        t(Knob::Accumulation, Scalar::Int(2)),
        t(Knob::Checkpointing, Scalar::Bool(true)),
        t(Knob::CompileMode, Scalar::Str("default".into())),
        t(Knob::Precision, Scalar::Str("bf16".into())),
    ];
    let argv = words("python train.py --per_device_train_batch_size 64 --gradient_accumulation_steps=1 --fp16 data.txt -- --per_device_train_batch_size 64");
    assert_eq!(
        turn(&argv, &d, &turns, &[]).unwrap().join(" "),
        "python train.py --per_device_train_batch_size 32 --gradient_accumulation_steps=2 --fp16 false data.txt \
         --gradient_checkpointing true --torch_compile_mode default --bf16 true -- --per_device_train_batch_size 64"
    );
    // `--fp16 data.txt`: a positional after an optional bool stays one.
    let argv = words("python train.py --fp16 True --gradient_checkpointing");
    assert_eq!(
        turn(
            &argv,
            &d,
            &[
                t(Knob::Precision, Scalar::Str("no".into())),
                t(Knob::Checkpointing, Scalar::Bool(false))
            ],
            &[]
        )
        .unwrap()
        .join(" "),
        "python train.py --fp16 False --gradient_checkpointing false"
    );
}

#[test]
fn switches_are_added_removed_or_refused() {
    let d = Defined::parse(ARGPARSE);
    let on = [t(Knob::Checkpointing, Scalar::Bool(true))];
    let off = [t(Knob::Checkpointing, Scalar::Bool(false))];
    let argv = words("python ap.py data --gradient-checkpointing --lr 0.1");
    assert_eq!(turn(&argv, &d, &on, &[]).unwrap(), argv);
    assert_eq!(
        turn(&argv, &d, &off, &[]).unwrap().join(" "),
        "python ap.py data --lr 0.1"
    );
    assert_eq!(
        turn(&words("python ap.py data"), &d, &on, &[])
            .unwrap()
            .join(" "),
        "python ap.py data --gradient-checkpointing"
    );
    // BooleanOptionalAction: off is its --no- flag.
    let compile = [(Knob::Checkpointing, "compile".to_string())];
    assert_eq!(
        turn(&words("python ap.py d --compile"), &d, &off, &compile)
            .unwrap()
            .join(" "),
        "python ap.py d --no-compile"
    );
    assert_eq!(
        turn(&words("python ap.py d --no-compile"), &d, &on, &compile)
            .unwrap()
            .join(" "),
        "python ap.py d --compile"
    );
    // A switch on by default with nothing to turn it off.
    let d2 = Defined::parse("options:\n  --ckpt  checkpoint (default: True)\n");
    let e = turn(
        &words("python t.py"),
        &d2,
        &off,
        &[(Knob::Checkpointing, "ckpt".into())],
    )
    .unwrap_err();
    assert!(
        e.contains("--ckpt is a switch that is on by default"),
        "{e}"
    );
}

#[test]
fn never_adds_a_flag_the_program_does_not_define() {
    let d = Defined::parse(ARGPARSE);
    let e = turn(
        &words("python ap.py d"),
        &d,
        &[t(Knob::Accumulation, Scalar::Int(2))],
        &[(Knob::Accumulation, "accum".into())],
    )
    .unwrap_err();
    assert!(
        e.contains("no flag for accumulation") && e.contains("--accum"),
        "{e}"
    );
    let e = turn(
        &words("python ap.py d"),
        &d,
        &[t(Knob::CompileMode, Scalar::Str("default".into()))],
        &[],
    )
    .unwrap_err();
    assert!(e.contains("--torch_compile_mode, --compile_mode"), "{e}");
    let e = turn(
        &words("python ap.py d"),
        &d,
        &[t(Knob::Precision, Scalar::Str("fp8".into()))],
        &[],
    )
    .unwrap_err();
    assert!(e.contains("no, fp16 or bf16"), "{e}");
    let only_fp16 = Defined::parse("options:\n  --fp16  half\n");
    let e = turn(
        &words("python t.py --fp16"),
        &only_fp16,
        &[t(Knob::Precision, Scalar::Str("bf16".into()))],
        &[],
    )
    .unwrap_err();
    assert!(e.contains("no --bf16 flag"), "{e}");
    assert_eq!(
        turn(
            &words("python t.py --fp16"),
            &only_fp16,
            &[t(Knob::Precision, Scalar::Str("no".into()))],
            &[]
        )
        .unwrap()
        .join(" "),
        "python t.py"
    );
    assert!(turn(
        &words("x"),
        &Defined::default(),
        &[t(Knob::Batch, Scalar::Int(1))],
        &[]
    )
    .is_err());
    let e = turn(
        &words("python ap.py d"),
        &d,
        &[t(Knob::Batch, Scalar::Str("big".into()))],
        &[],
    );
    assert_eq!(
        e.unwrap().join(" "),
        "python ap.py d --batch-size big",
        "the ladder's value, as given"
    );
    let e = turn(
        &words("python ap.py d"),
        &d,
        &[t(Knob::Batch, Scalar::Null)],
        &[],
    )
    .unwrap_err();
    assert!(e.contains("--batch-size takes a value"), "{e}");
}

#[test]
fn precision_as_a_value_in_the_programs_spelling() {
    let d =
        Defined::parse("options:\n  --precision PRECISION\n  --mixed_precision {no,fp16,bf16}\n");
    let bf16 = [t(Knob::Precision, Scalar::Str("bf16".into()))];
    // mixed_precision comes first among the known names.
    let user = [(Knob::Precision, "precision".to_string())];
    assert_eq!(
        turn(&words("python l.py --precision 16-mixed"), &d, &bf16, &user)
            .unwrap()
            .join(" "),
        "python l.py --precision bf16-mixed"
    );
    assert_eq!(
        found(&d, &words("python l.py --precision=16-mixed"), &user)[0]
            .found
            .value,
        Some(Scalar::Str("fp16".into()))
    );
    assert_eq!(
        turn(&words("python l.py"), &d, &bf16, &[])
            .unwrap()
            .join(" "),
        "python l.py --mixed_precision bf16"
    );
    let choices = Defined::parse("options:\n  --precision {32-true,16-mixed,bf16-mixed}\n");
    assert_eq!(
        turn(
            &words("python l.py"),
            &choices,
            &[t(Knob::Precision, Scalar::Str("no".into()))],
            &[]
        )
        .unwrap()
        .join(" "),
        "python l.py --precision 32-true"
    );
    let e = turn(
        &words("python l.py"),
        &choices,
        &[t(Knob::CompileMode, Scalar::Str("x".into()))],
        &[(Knob::CompileMode, "precision".into())],
    )
    .unwrap_err();
    assert!(
        e.contains("takes one of 32-true, 16-mixed, bf16-mixed, not x"),
        "{e}"
    );
}

#[test]
fn values_that_look_like_flags_abbreviations_and_repeats() {
    let d = Defined::parse(HF);
    let batch = [t(Knob::Batch, Scalar::Int(4))];
    // argparse refuses `--output_dir --per_device...` and reads the latter
    // as the flag: so do we; the word after the flag is its value.
    let argv = words("python t.py --output_dir --per_device_train_batch_size 64");
    assert_eq!(
        turn(&argv, &d, &batch, &[]).unwrap().join(" "),
        "python t.py --output_dir --per_device_train_batch_size 4"
    );
    // A value with a space is never a flag.
    let argv: Vec<String> = [
        "python",
        "t.py",
        "--output_dir",
        "--per_device_train_batch_size 2",
    ]
    .map(String::from)
    .into();
    assert_eq!(turn(&argv, &d, &batch, &[]).unwrap().last().unwrap(), "4");
    assert_eq!(
        turn(&argv, &d, &batch, &[]).unwrap()[3],
        "--per_device_train_batch_size 2"
    );
    // An abbreviation argparse accepts, and each repeat changed.
    let argv = words("python t.py --per_device_train 64 --per-device-train-batch-size=16");
    assert_eq!(found(&d, &argv, &[])[0].found.value, Some(Scalar::Int(16)));
    assert_eq!(
        turn(&argv, &d, &batch, &[]).unwrap().join(" "),
        "python t.py --per_device_train 4 --per-device-train-batch-size=4"
    );
    // A short flag with its value in the same word.
    let d2 = Defined::parse(ARGPARSE);
    let argv = words("python ap.py -b64 d");
    assert_eq!(found(&d2, &argv, &[])[0].found.value, Some(Scalar::Int(64)));
    assert_eq!(
        turn(&argv, &d2, &batch, &[]).unwrap().join(" "),
        "python ap.py -b4 d"
    );
    // An ambiguous prefix is no flag of ours.
    let two = Defined::parse(
        "options:\n  --per_device_train_batch_size N\n  --per_device_eval_batch_size N\n",
    );
    let argv = words("python t.py --per 64");
    assert_eq!(found(&two, &argv, &[])[0].source, Source::Unknown);
    let argv = words("python t.py --per_device_t 64");
    assert_eq!(found(&two, &argv, &[])[0].source, Source::Command);
    // A negative value is written joined.
    let argv = words("python t.py --per_device_train_batch_size 64");
    assert_eq!(
        turn(&argv, &d, &[t(Knob::Batch, Scalar::Int(-1))], &[])
            .unwrap()
            .join(" "),
        "python t.py --per_device_train_batch_size -1"
    );
    let argv = words("python t.py --torch_compile_mode max-autotune");
    assert_eq!(
        turn(
            &argv,
            &d,
            &[t(Knob::CompileMode, Scalar::Str("-x".into()))],
            &[]
        )
        .unwrap()
        .join(" "),
        "python t.py --torch_compile_mode=-x"
    );
}

#[test]
fn value_of_and_with_flag() {
    let d = Defined::parse(HF);
    let argv = words("python t.py --output_dir a --output-dir=b data -- --output_dir c");
    assert_eq!(
        value_of(&argv, &["--output_dir", "--output-dir"]).as_deref(),
        Some("b")
    );
    assert_eq!(value_of(&argv, &["--bs"]), None);
    assert_eq!(
        value_of(&words("python t.py --output_dir"), &["--output_dir"]),
        None
    );
    assert_eq!(
        with_flag(&argv, &d, "resume_from_checkpoint", "out/checkpoint-5").unwrap().join(" "),
        "python t.py --output_dir a --output-dir=b data --resume_from_checkpoint out/checkpoint-5 -- --output_dir c"
    );
    let again = words("python t.py --resume-from-checkpoint=x");
    assert_eq!(
        with_flag(&again, &d, "--resume_from_checkpoint", "y")
            .unwrap()
            .join(" "),
        "python t.py --resume-from-checkpoint=y"
    );
    assert_eq!(
        with_flag(
            &argv,
            &Defined::parse(ARGPARSE),
            "resume_from_checkpoint",
            "x"
        ),
        None
    );
    assert_eq!(with_flag(&argv, &d, "bf16", "x"), None, "not a value flag");
}

#[test]
fn never_panics_on_cut_help_or_odd_commands() {
    for text in [HF, ARGPARSE] {
        for (cut, _) in text.char_indices() {
            let _ = Defined::parse(&text[..cut]);
            let _ = Defined::parse(&text[cut..]);
        }
    }
    let d = Defined::parse(HF);
    let odd = [
        "--", "-", "-=", "--=", "--bf16=", "-é", "--per", "=", "", " ", "--fp16", "-1", "python",
        "x.py", "-m",
    ];
    let turns = [
        t(Knob::Batch, Scalar::Int(1)),
        t(Knob::Precision, Scalar::Str("bf16".into())),
        t(Knob::Checkpointing, Scalar::Bool(false)),
    ];
    for a in odd {
        for b in odd {
            for c in odd {
                let argv: Vec<String> = ["python", a, b, c].map(String::from).into();
                let _ = found(&d, &argv, &[]);
                let _ = turn(&argv, &d, &turns, &[]);
                let _ = value_of(&argv, &["--per", "-"]);
                let _ = with_flag(&argv, &d, "output_dir", "-");
                let _ = turn(&argv[1..], &d, &turns, &[]);
            }
        }
    }
}
