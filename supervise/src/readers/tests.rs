//! The reader over whole lines as a program prints them.

use super::*;

fn triples(reports: &[Report]) -> Vec<(String, f64, u64)> {
    reports
        .iter()
        .map(|r| (r.metric.to_string(), r.value, r.step))
        .collect()
}

fn t(name: &str, value: f64, step: u64) -> (String, f64, u64) {
    (name.to_string(), value, step)
}

fn reader(metric: &str, regex: Option<&str>) -> Reader {
    Reader::new(metric, regex).unwrap()
}

#[test]
fn the_seeds_lines_with_no_configuration() {
    let mut r = reader("val_loss", None);
    // /work/shared/seeds/001's log, then lines that are not reports.
    let log = "Epoch 1/50 | Train Loss: 4.1156 | Val Loss: 1.3616 | LR: 0.000001 | Time: 140.54s\n\
               Epoch 2/50 | Train Loss: 3.8234 | Val Loss: 1.2103 | LR: 0.000001 | Time: 95.32s\n\
               ✅ **Epoch 2+ complete successfully**\n";
    let reports: Vec<Report> = log.lines().flat_map(|l| r.line(l)).collect();
    assert_eq!(
        triples(&reports),
        [
            t("train_loss", 4.1156, 1),
            t("val_loss", 1.3616, 1),
            t("lr", 0.000001, 1),
            t("seconds", 140.54, 1),
            t("train_loss", 3.8234, 2),
            t("val_loss", 1.2103, 2),
            t("lr", 0.000001, 2),
            t("seconds", 95.32, 2),
        ]
    );
    assert_eq!(reports[1].metric, Metric::ValLoss);
    assert_eq!(reports[0].metric, Metric::TrainLoss);
}

#[test]
fn json_and_hugging_face_lines() {
    let mut r = reader("eval_loss", None);
    assert_eq!(
        triples(&r.line(r#"{"epoch": 3, "val_loss": 0.12}"#)),
        [t("val_loss", 0.12, 3)]
    );
    // A Trainer run with logging_steps at a third of an epoch and eval per
    // epoch: the loss lines' fractional epochs count, eval's are epochs.
    let lines = [
        "{'loss': 0.6925, 'grad_norm': 2.1, 'learning_rate': 4.5e-05, 'epoch': 0.33}",
        "{'loss': 0.5012, 'grad_norm': 1.9, 'learning_rate': 4e-05, 'epoch': 0.67}",
        "{'loss': 0.4433, 'grad_norm': 1.7, 'learning_rate': 3.5e-05, 'epoch': 1.0}",
        "{'eval_loss': 0.41, 'eval_runtime': 1.2, 'eval_samples_per_second': 80.5, 'eval_steps_per_second': 10.1, 'epoch': 1.0}",
        "{'eval_loss': 0.38, 'eval_runtime': 1.2, 'eval_samples_per_second': 80.5, 'eval_steps_per_second': 10.1, 'epoch': 2.0}",
    ];
    let all: Vec<Report> = lines.iter().flat_map(|l| r.line(l)).collect();
    let steps = |name: &str| -> Vec<(f64, u64)> {
        all.iter()
            .filter(|x| x.metric.as_str() == name)
            .map(|x| (x.value, x.step))
            .collect()
    };
    assert_eq!(steps("loss"), [(0.6925, 1), (0.5012, 2), (0.4433, 3)]);
    assert_eq!(steps("eval_loss"), [(0.41, 1), (0.38, 2)]);
    assert_eq!(steps("learning_rate")[0], (4.5e-05, 1));
}

#[test]
fn a_space_written_for_wandb_finds_trainer_keys_by_wandbs_names() {
    // W&B's Hugging Face callback logs eval_loss as eval/loss, loss as
    // train/loss.
    let mut r = reader("eval/loss", None);
    let got = r.line("{'eval_loss': 0.41, 'epoch': 1.0}");
    assert_eq!(triples(&got), [t("eval/loss", 0.41, 1)]);
    let mut r = reader("train/loss", None);
    assert_eq!(
        triples(&r.line("{'loss': 0.7, 'epoch': 0.5}")),
        [t("train/loss", 0.7, 1)]
    );
}

#[test]
fn a_regex_for_pytorch_examples_word_language_model() {
    // pytorch/examples word_language_model/main.py: `| end of epoch {:3d} |
    // time: {:5.2f}s | valid loss {:5.2f} | valid ppl {:8.2f}`.
    let mut r = reader("valid_loss", Some(r"valid loss\s+([0-9.]+)"));
    let log = [
        "| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 14.31 | loss  7.63 | ppl  2050.85",
        "-----------------------------------------------------------------------------------------",
        "| end of epoch   1 | time: 47.57s | valid loss  5.86 | valid ppl   350.66",
        "| end of epoch   2 | time: 47.12s | valid loss  5.54 | valid ppl   254.63",
        "| End of training | test loss  5.50 | test ppl   244.69",
    ];
    let reports: Vec<Report> = log.iter().flat_map(|l| r.line(l)).collect();
    // Its batch lines' `loss  7.63` is a pair of a name the reader knows.
    assert_eq!(
        triples(&reports),
        [
            t("loss", 7.63, 1),
            t("valid_loss", 5.86, 1),
            t("valid_loss", 5.54, 2)
        ]
    );
}

#[test]
fn a_plain_scripts_metric_lines_with_no_configuration() {
    // What an argparse PyTorch script prints, in the three forms.
    let mut r = reader("", None);
    let log = [
        "loading data...",
        "epoch 0 val_loss 2.2527",
        "epoch 1: train_loss=0.62 val_loss=0.51 lr=0.001",
        "val_loss: 0.43",
        "epoch 3: train_loss=0.51 val_loss=0.43",
        "New best model saved! (val_loss: 0.43)",
    ];
    let reports: Vec<Report> = log.iter().flat_map(|l| r.line(l)).collect();
    assert_eq!(
        triples(&reports),
        [
            t("val_loss", 2.2527, 0),
            t("train_loss", 0.62, 1),
            t("val_loss", 0.51, 1),
            t("val_loss", 0.43, 2),
            t("train_loss", 0.51, 3),
            t("val_loss", 0.43, 3),
        ]
    );
    assert!(reports.iter().all(|x| x.source == Source::Pairs));
    assert_eq!(reports[0].metric, Metric::ValLoss);
    assert_eq!(
        reports.iter().map(|x| x.epoch).collect::<Vec<_>>(),
        [Some(0.0), Some(1.0), Some(1.0), None, Some(3.0), Some(3.0)]
    );
}

#[test]
fn a_trainers_fractional_epoch_is_kept_as_it_is() {
    let mut r = reader("", None);
    let got =
        r.line("{'loss': '2.1', 'grad_norm': '0.5', 'learning_rate': '5e-05', 'epoch': '0.625'}");
    assert_eq!(got[0].epoch, Some(0.625));
    assert_eq!(got[0].step, 1);
    let got = r.line(r#"{"step": 200, "val_loss": 0.3}"#);
    assert_eq!((got[0].epoch, got[0].step), (None, 200));
}

#[test]
fn each_match_is_one_report_and_the_regex_alone_reports_its_metric() {
    let mut r = reader("val_loss", Some(r"vl=(\S+)"));
    assert_eq!(
        triples(&r.line("vl=0.5 vl=0.4 vl=oops vl=nan")[..2]),
        [t("val_loss", 0.5, 1), t("val_loss", 0.4, 2)]
    );
    // The seeds' line still gives its other metrics, not val_loss twice.
    let got = r.line("Epoch 3/9 | Train Loss: 1.0 | Val Loss: 9.9 | vl=0.3");
    assert_eq!(
        triples(&got),
        [t("train_loss", 1.0, 3), t("val_loss", 0.3, 4)]
    );
}

#[test]
fn non_finite_values_are_reported() {
    let mut r = reader("val_loss", Some(r"val: (\S+)"));
    let got = r.line("val: nan");
    assert_eq!(got.len(), 1);
    assert!(got[0].value.is_nan());
    let got = r.line("Epoch 2/5 | Train Loss: inf");
    assert_eq!(got[0].value, f64::INFINITY);
}

#[test]
fn a_regex_needs_exactly_one_capture_group() {
    for (pattern, groups) in [("valid loss", 0), (r"(a)\s+(b)", 2), (r"(?P<v>x)(y)", 2)] {
        let err = Reader::new("val_loss", Some(pattern)).unwrap_err();
        let message = format!("{err:#}");
        assert_eq!(common::exit::code_of(&err), common::exit::BAD_INPUT);
        assert!(
            message.contains(&format!(
                "has {groups} capture groups; it needs exactly one"
            )),
            "{message}"
        );
    }
    let err = Reader::new("val_loss", Some("(unclosed")).unwrap_err();
    assert_eq!(common::exit::code_of(&err), common::exit::BAD_INPUT);
    assert!(format!("{err:#}").starts_with("metric.regex for val_loss does not compile:"));
    assert!(Reader::new("x", Some(r"(?:a|b)\s*([0-9.]+)")).is_ok());
}

#[test]
fn what_a_terminal_shows_of_a_line_is_read() {
    let mut r = reader("loss", None);
    // tqdm's write: the bar, a carriage return, the dict line.
    let line = " 33%|███▎      | 5/15 [00:01<00:02,  4.12it/s]\r                    \r{'loss': 0.5, 'epoch': 1.0}\r\n";
    assert_eq!(triples(&r.line(line)), [t("loss", 0.5, 1)]);
    // Colour codes around a seeds' line.
    let line = "\x1b[32mEpoch 2/4 | Loss: 0.25\x1b[0m";
    assert_eq!(triples(&r.line(line)), [t("train_loss", 0.25, 2)]);
}

#[test]
fn a_metrics_steps_only_increase() {
    let mut s = Steps::default();
    let got: Vec<u64> = [
        Some(0.0),
        Some(1.0),
        Some(1.0),
        None,
        Some(2.0),
        Some(5.0),
        Some(-1.0),
        Some(f64::NAN),
        Some(1e300),
    ]
    .into_iter()
    .map(|e| s.next("m", e))
    .collect();
    assert_eq!(got, [0, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(s.next("other", None), 1);
}

#[test]
fn lines_that_are_not_reports_yield_nothing() {
    let mut r = reader("val_loss", None);
    for line in [
        "",
        "train: /work/main/configs/demo_cpu.yaml · cpu · 284897 parameters",
        "New best model saved! (val_loss: 0.1543)",
        "Traceback (most recent call last):",
        "{not a dict}",
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ] {
        assert!(r.line(line).is_empty(), "{line}");
    }
}

#[test]
fn a_wandb_run_summary_is_kept_not_reported() {
    // As wandb 0.31.0 prints it at run.finish() (offline).
    let mut r = Reader::new("val_loss", None).unwrap();
    let lines = [
        "wandb: Run history:",
        "wandb:    epoch ▁█",
        "wandb: val_loss █▁",
        "wandb: ",
        "wandb: Run summary:",
        "wandb:    epoch 2",
        "wandb: val_loss 0.123",
        "wandb: ",
        "wandb: You can sync this run to the cloud by running:",
    ];
    for l in lines {
        assert!(r.line(l).is_empty(), "{l}");
    }
    assert_eq!(r.wandb_summary("val_loss"), Some(0.123));
    assert_eq!(r.wandb_summary("epoch"), Some(2.0));
    assert_eq!(r.wandb_summary("You"), None);
}

#[test]
fn each_report_names_its_reader() {
    let mut r = reader("valid", Some(r"valid loss\s+([0-9.]+)"));
    let sources = |line: &str, r: &mut Reader| -> Vec<(String, Source)> {
        r.line(line)
            .into_iter()
            .map(|x| (x.metric.to_string(), x.source))
            .collect()
    };
    assert_eq!(
        sources("Epoch 1/3 | Val Loss: 0.5", &mut r),
        [("val_loss".to_string(), Source::EpochLine)]
    );
    assert_eq!(
        sources(r#"{"epoch": 1, "acc": 0.5}"#, &mut r),
        [("acc".to_string(), Source::Dict)]
    );
    assert_eq!(
        sources("| end of epoch 1 | valid loss 0.41", &mut r),
        [("valid".to_string(), Source::Regex)]
    );
    let mut rows = CsvRows::new();
    let got = rows.push(b"epoch,val_loss\n1,0.3\n");
    assert_eq!(got[0].source, Source::Csv);
    assert_eq!(Source::Csv.as_str(), "metrics.csv rows");
}
