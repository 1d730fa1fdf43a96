"""Real Optuna and Rustuna on the other side of sweep's journal tests
(journal_optuna.rs).

  load PATH STUDY            print the study as Optuna loads it (JSON)
  write PATH STUDY           Optuna writes a study with every kind of trial
  append PATH STUDY N SLEEP  Optuna adds N trials to an existing study, each
                             taking SLEEP seconds (to race with our writer)
  rustuna-load PATH STUDY    print the study as Rustuna loads it (as `load`)
  rustuna-write PATH STUDY   Rustuna writes a study with every kind of trial
                             and discards some (DISCARD_TRIALS, op_code 10);
                             prints the discarded trials' numbers and those
                             Rustuna still shows when it applies the discard
  rustuna-discard PATH STUDY N...
                             Rustuna discards trials N... of a study
"""

import json
import sys
import time

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

optuna.logging.set_verbosity(optuna.logging.ERROR)


def storage(path):
    return JournalStorage(JournalFileBackend(path))


def when(dt):
    return None if dt is None else [type(dt).__name__, dt.isoformat(timespec="microseconds")]


def dump(study):
    trials = []
    for t in study.trials:
        trials.append(
            {
                "number": t.number,
                "state": t.state.name,
                "params": t.params,
                "distributions": {
                    k: json.loads(optuna.distributions.distribution_to_json(d))
                    for k, d in t.distributions.items()
                },
                "value": t.value,
                "intermediate_values": {str(k): v for k, v in t.intermediate_values.items()},
                "user_attrs": t.user_attrs,
                "datetime_start": when(t.datetime_start),
                "datetime_complete": when(t.datetime_complete),
            }
        )
    return {
        "direction": study.direction.name,
        "user_attrs": study.user_attrs,
        "trials": trials,
    }


def rustuna_dump(study):
    """`dump` of a Rustuna study, distributions in Optuna's JSON form."""

    def dist(d):
        d = dict(d.to_dict())
        return {"name": d.pop("type"), "attributes": d}

    trials = []
    for t in study.trials:
        trials.append(
            {
                "number": t.number,
                "state": t.state.name,
                "params": t.params,
                "distributions": {k: dist(d) for k, d in t.distributions.items()},
                "value": t.value,
                "intermediate_values": {str(k): v for k, v in t.intermediate_values.items()},
                "user_attrs": t.user_attrs.to_dict(),
                "datetime_start": when(t.datetime_start),
                "datetime_complete": when(t.datetime_complete),
            }
        )
    (direction,) = study.directions
    # Rustuna's enums number their members otherwise than Optuna's; names agree.
    name = str(direction).rsplit(".", 1)[-1]
    return {"direction": name, "user_attrs": study.user_attrs, "trials": trials}


def rustuna_write(path, name):
    """Rustuna's own journal: a study before (so ids are not numbers), then
    every state, every kind of parameter, reports and attributes, and two
    DISCARD_TRIALS records, one naming the other study's trial too."""
    import rustuna
    from rustuna.storages import JournalFileStorage
    from rustuna.trial import TrialState as RState

    storage = JournalFileStorage(path)
    other = rustuna.create_study(study_name="other", storage=storage)
    for _ in range(2):
        t = other.ask()
        other.tell(t.number, t.suggest_float("x", 0, 1))
    study = rustuna.create_study(
        study_name=name, storage=storage, direction="maximize",
        sampler=rustuna.samplers.RandomSampler(seed=0),
    )
    study.set_user_attr("owner", "rustuna")
    ids = {}
    ends = ["COMPLETE", "COMPLETE", "PRUNED", "FAIL", "COMPLETE", "RUNNING", "COMPLETE"]
    for end in ends:
        t = study.ask()
        lr = t.suggest_float("lr", 1e-5, 1e-1, log=True)
        t.suggest_float("dropout", 0.0, 0.5, step=0.1)
        layers = t.suggest_int("layers", 1, 4)
        t.suggest_int("batch", 16, 128, log=True)
        t.suggest_categorical("opt", ["adam", None, 3, 0.5, True])
        t.set_user_attr("run_dir", f"runs/{t.number}")
        t.set_user_attr("note", None)
        tid = storage.get_trial_id_from_study_id_trial_number(study._study_id, t.number)
        ids[t.number] = tid
        for step in range(2):
            storage.set_trial_intermediate_value(tid, step, lr * layers / (step + 1))
        if end == "COMPLETE":
            study.tell(t.number, lr * layers)
        elif end != "RUNNING":
            study.tell(t.number, None, getattr(RState, end))
    study.enqueue_trial({"lr": 1e-3})  # left WAITING
    discarded = [1, 5]
    storage.discard_trials([ids[n] for n in discarded])
    # A second record: a trial of the other study, and one already named.
    storage.discard_trials([0, ids[1]])
    applied = rustuna.load_study(
        study_name=name, storage=JournalFileStorage(path, apply_discard=True)
    )
    return {"discarded": discarded, "applied": [t.number for t in applied.trials]}


def objective(trial):
    lr = trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    layers = trial.suggest_int("layers", 1, 4)
    trial.suggest_int("batch", 16, 128, step=16)
    use_bn = trial.suggest_categorical("use_bn", [True, False])
    trial.suggest_categorical("opt", ["adam", "sgd"])
    trial.suggest_float("dropout", 0.0, 0.5, step=0.1)
    trial.set_user_attr("run_dir", f"runs/{trial.number}")
    trial.set_user_attr("peak_mem_gb", 3.25)
    trial.set_user_attr("note", None)
    loss = 1.0 + lr * layers + (0.0 if use_bn else 0.1)
    for step in range(3):
        loss *= 0.9
        trial.report(loss, step)
    if trial.number == 2:
        raise optuna.TrialPruned()
    if trial.number == 3:
        raise ValueError("a crash in the objective")
    return loss


def main():
    cmd, path, name = sys.argv[1:4]
    if cmd == "load":
        study = optuna.load_study(study_name=name, storage=storage(path))
        print(json.dumps(dump(study)))
    elif cmd == "write":
        s = storage(path)
        # Another study first, so trial ids and numbers differ.
        other = optuna.create_study(study_name="other", storage=s)
        other.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
        study = optuna.create_study(
            study_name=name, storage=s, sampler=optuna.samplers.RandomSampler(seed=0)
        )
        study.set_user_attr("owner", "optuna")
        study.enqueue_trial({"lr": 1e-3, "layers": 2})
        study.optimize(objective, n_trials=6, catch=(ValueError,))
        study.enqueue_trial({"lr": 1e-2})  # left WAITING
        print(json.dumps(dump(study)))
    elif cmd == "append":
        n, pause = int(sys.argv[4]), float(sys.argv[5])
        study = optuna.load_study(study_name=name, storage=storage(path))

        def simple(trial):
            x = trial.suggest_float("lr", 1e-5, 1e-1, log=True)
            trial.set_user_attr("writer", "optuna")
            time.sleep(pause)
            trial.report(x, 0)
            return x

        study.optimize(simple, n_trials=n)
    elif cmd == "rustuna-load":
        import rustuna
        from rustuna.storages import JournalFileStorage

        study = rustuna.load_study(study_name=name, storage=JournalFileStorage(path))
        print(json.dumps(rustuna_dump(study)))
    elif cmd == "rustuna-write":
        print(json.dumps(rustuna_write(path, name)))
    elif cmd == "rustuna-discard":
        import rustuna
        from rustuna.storages import JournalFileStorage

        journal = JournalFileStorage(path)
        study = rustuna.load_study(study_name=name, storage=journal)
        journal.discard_trials(
            [journal.get_trial_id_from_study_id_trial_number(study._study_id, int(n))
             for n in sys.argv[4:]]
        )
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
