//! The training loop driven in-process, as a library: it only emits events,
//! faults are handed in, and listeners see the whole life of the epochs.

use common::config::Config;
use common::wire::run_dir::RunDir;
use std::cell::RefCell;
use std::rc::Rc;
use tch::Device;
use train_model::training::events::{Event, Listener, Listeners, Skip};
use train_model::training::{Checkpointer, Faults, Interrupter, Stop, Trainer};

/// Writes down each event it receives, one word (and numbers) per event.
struct Record(Rc<RefCell<Vec<String>>>);

impl Listener for Record {
    fn on(&mut self, event: &Event) -> anyhow::Result<()> {
        let line = match event {
            Event::Batch { epoch, done, .. } => format!("batch {epoch}:{done}"),
            Event::StepSkipped {
                epoch,
                step,
                why: Skip::NonFiniteLoss(_),
            } => format!("skipped {epoch}:{step} (loss)"),
            Event::StepSkipped { epoch, step, .. } => format!("skipped {epoch}:{step} (fp16)"),
            Event::OomRecovered(e) => {
                format!("oom {}:{} -> {}", e.epoch, e.step, e.new_micro_batch)
            }
            Event::EpochEnd(r) => format!("epoch {} skipped {}", r.epoch, r.skipped_steps),
            Event::NewBest(b) => format!("best {}", b.epoch),
            _ => return Ok(()),
        };
        self.0.borrow_mut().push(line);
        Ok(())
    }
}

fn tiny() -> Config {
    let mut c: Config = serde_yaml::from_str(
        "batch_size: 16\ntemporal_frames: 2\nepochs: 2\nimage_size: 8\nscalar_features: 2\n\
         data: {synthetic_train_examples: 48, synthetic_val_examples: 16}\n\
         architecture: {channels: [4], embed_dim: 8, attention_heads: 2}\n",
    )
    .unwrap();
    c.warmup_epochs = 1;
    c
}

#[test]
fn the_loop_emits_every_step_and_epoch_and_takes_its_faults_from_the_caller() {
    tch::set_num_threads(1);
    let dir = tempfile::tempdir().unwrap();
    let mut trainer = Trainer::new(
        tiny(),
        Checkpointer::new(RunDir::new(dir.path())),
        Device::Cpu,
    )
    .unwrap();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let mut events = Listeners::default();
    events.push(Record(seen.clone()));
    // Handed in, not read from the environment.
    std::env::set_var("TRAINGUARD_FAULT", "sigkill@1:1");
    let mut faults = Faults::parse("nan@1:2,oom@2:3").unwrap();
    let stop = trainer
        .run(&mut faults, &Interrupter::new(), &mut events)
        .unwrap();
    assert!(matches!(stop, Stop::Finished), "{stop:?}");
    let seen = seen.borrow().join(", ");
    assert!(
        seen.starts_with("batch 1:1, skipped 1:2 (loss), batch 1:3, epoch 1 skipped 1, best 1, batch 2:1, batch 2:2, oom 2:3 -> 8, batch 2:3, epoch 2 skipped 0"),
        "{seen}"
    );
    // The loop wrote the checkpoints and nothing else: the files are the
    // listeners' (none here).
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["best.safetensors", "checkpoint.safetensors"]);
}

/// Asks the loop to stop when it sees the batch `at` (epoch, step) end.
struct StopAt {
    at: (u32, u64),
    interrupter: Interrupter,
}

impl Listener for StopAt {
    fn on(&mut self, event: &Event) -> anyhow::Result<()> {
        if let Event::Batch { epoch, done, .. } = event {
            if (*epoch, *done) == self.at {
                self.interrupter.stop();
            }
        }
        Ok(())
    }
}

#[test]
fn a_stop_handed_to_the_loop_ends_it_before_the_next_step() {
    tch::set_num_threads(1);
    let dir = tempfile::tempdir().unwrap();
    let mut trainer = Trainer::new(
        tiny(),
        Checkpointer::new(RunDir::new(dir.path())),
        Device::Cpu,
    )
    .unwrap();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let interrupter = Interrupter::new();
    let mut events = Listeners::default();
    events.push(Record(seen.clone()));
    events.push(StopAt {
        at: (2, 1),
        interrupter: interrupter.clone(),
    });
    let stop = trainer
        .run(&mut Faults::none(), &interrupter, &mut events)
        .unwrap();
    match stop {
        Stop::Stopped { reason } => assert_eq!(
            reason,
            "stopped on request (SIGINT or SIGTERM) before epoch 2 step 2"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        seen.borrow().join(", "),
        "batch 1:1, batch 1:2, batch 1:3, epoch 1 skipped 0, best 1, batch 2:1"
    );
    // Epoch 1's checkpoint is the last whole one.
    assert!(dir.path().join("checkpoint.safetensors").exists());
}
