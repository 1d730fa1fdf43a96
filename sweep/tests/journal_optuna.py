"""Real Optuna on the other side of sweep's journal tests (journal_optuna.rs).

  load PATH STUDY            print the study as Optuna loads it (JSON)
  write PATH STUDY           Optuna writes a study with every kind of trial
  append PATH STUDY N SLEEP  Optuna adds N trials to an existing study, each
                             taking SLEEP seconds (to race with our writer)
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
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
