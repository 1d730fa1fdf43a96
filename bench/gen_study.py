#!/usr/bin/env python3
"""Writes a large sweep study without running a trial, for the scale
benchmarks and tests (issue 44): N finished trials of a program sweep with
the attributes `train sweep` records (peaks, predicted peaks, attempts,
at_once, reports, seconds), intermediate values, and the failures the
newer issues add (out-of-memory, refused points: `predicted-out-of-memory`
with `room_mib`), pruned trials and interrupted ones.

  gen_study.py --trials N --out JOURNAL [--seed S] [--optuna] [--name STUDY] [--interrupted F]
  gen_study.py --trials N --out SCRIPT.sql --postgres STUDY_ID [--seed S] [--interrupted F]

By default the records are written as `train sweep` writes them (Optuna's
journal format, one JSON object a line, the same op codes and fields), in
one pass: 50,000 trials take seconds. With --optuna the same trials go
through Optuna itself (`JournalStorage`, `study.add_trial`), for a side
by side with Optuna's own reader on a file Optuna wrote (minutes at
50,000). With --postgres the same trials are written as a psql script that
adds them to study STUDY_ID of a database in Optuna's schema (rows as
Optuna's RDBStorage stores them, `COPY`ed in), after the trials it holds:
the same study in PostgreSQL for the database's side of the benchmarks.
"""

import argparse
import datetime
import json
import math
import os
import random
import sys
import uuid

CHOICES = [64, 128, 256, 512, 1024]


def dist(name):
    """The space's distributions as Optuna's JSON names them."""
    return {
        "lr": {"name": "FloatDistribution", "attributes": {"step": None, "low": 1e-5, "high": 1e-1, "log": True}},
        "batch_size": {"name": "IntDistribution", "attributes": {"log": False, "step": 1, "low": 1, "high": 64}},
        "width": {"name": "CategoricalDistribution", "attributes": {"choices": CHOICES}},
    }[name]


def trial(rng, number, start, interrupted=0.02):
    """One trial: its state (1 COMPLETE, 2 PRUNED, 3 FAIL), params (internal
    and external), value, intermediate values and user attributes."""
    lr = math.exp(rng.uniform(math.log(1e-5), math.log(1e-1)))
    batch = rng.randint(1, 64)
    w = rng.randrange(len(CHOICES))
    width = CHOICES[w]
    need = 300 + batch * width / 8
    loss = abs(math.log10(lr) + 3) * 0.3 + 256 / width * 0.05 + rng.random() * 0.05
    steps = rng.randint(3, 10)
    curve = {s: loss * (1 + 2.0 / s) for s in range(1, steps + 1)}
    attrs = {"run_dir": f"s/trials/{number:04d}/run", "at_once": rng.choice([1, 2, 4]),
             "worker": {"host": "gen", "pid": 1000, "start": 1}}
    measured = {"epochs": steps, "reports": steps, "peak_host_pss_mib": round(need * rng.uniform(0.97, 1.03), 1),
                "peak_host_anon_mib": round(need * 0.9, 1), "cpu_cores": round(rng.uniform(0.8, 1.2), 2),
                "seconds": round(rng.uniform(2, 30), 1)}
    if number >= 3:
        attrs.update({"predicted_peak_mib": round(need), "predicted_low_mib": round(need * 0.9),
                      "predicted_high_mib": round(need * 1.1), "predicted_of": "host-pss"})
    r = rng.random()
    if need > 4000 and r < 0.5:
        state, value, curve = 3, None, {}
        attrs.update({"error_class": "predicted-out-of-memory", "room_mib": 4000,
                      "error_message": f"not run: predicted to need {need:.0f} MiB of host memory"})
    elif need > 4000:
        state, value = 3, None
        curve = dict(list(curve.items())[:1])
        attrs.update(measured, error_class="out-of-memory", exit="MemoryError",
                     error_message="MemoryError: out of memory", peak_host_pss_mib=3990.0)
    elif r < 0.05:
        state, value = 2, curve[max(1, steps // 2)]
        curve = {s: v for s, v in curve.items() if s <= steps // 2}
        attrs.update(measured, prune_reason="median pruner: worse than the median at its step")
    elif r < 0.05 + interrupted:
        state, value, curve = 3, None, {}
        attrs.update(error_class="interrupted", error_message="the sweep was stopped")
    else:
        state, value = 1, loss
        attrs.update(measured, attempts=1)
    return {"state": state, "value": value, "curve": curve, "attrs": attrs,
            "internal": {"lr": lr, "batch_size": batch, "width": w},
            "external": {"lr": lr, "batch_size": batch, "width": width},
            "start": start, "complete": start + datetime.timedelta(seconds=attrs.get("seconds", 1))}


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")


def write_ours(trials, path, name):
    """As `train sweep` writes them: create, intermediate values, each
    attribute, the end."""
    worker = f"{uuid.uuid4()}-1000"
    dists = {k: json.dumps(dist(k)) for k in ("lr", "batch_size", "width")}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        def put(record):
            f.write(json.dumps({"op_code": record.pop("op"), "worker_id": worker, **record},
                               separators=(",", ":")) + "\n")
        put({"op": 0, "study_name": name, "directions": [1]})
        for n, t in enumerate(trials):
            first = {k: t["attrs"][k] for k in ("at_once", "run_dir", "worker")}
            rest = {k: v for k, v in t["attrs"].items() if k not in first}
            put({"op": 4, "study_id": 0, "datetime_start": iso(t["start"]), "state": 0, "value": None,
                 "values": None, "distributions": dists, "params": t["internal"], "user_attrs": first,
                 "system_attrs": {}, "intermediate_values": {}})
            for step, v in t["curve"].items():
                put({"op": 7, "trial_id": n, "step": step, "intermediate_value": v})
            for k, v in rest.items():
                put({"op": 8, "trial_id": n, "user_attr": {k: v}})
            put({"op": 6, "trial_id": n, "state": t["state"],
                 "values": None if t["value"] is None else [t["value"]], "datetime_complete": iso(t["complete"])})
    os.replace(tmp, path)


def write_optuna(trials, path, name):
    """Through Optuna itself: one add_trial per trial."""
    import optuna
    from optuna.distributions import json_to_distribution
    from optuna.trial import TrialState, create_trial

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path))
    study = optuna.create_study(study_name=name, storage=storage, direction="minimize")
    dists = {k: json_to_distribution(json.dumps(dist(k))) for k in ("lr", "batch_size", "width")}
    states = {1: TrialState.COMPLETE, 2: TrialState.PRUNED, 3: TrialState.FAIL}
    for t in trials:
        study.add_trial(create_trial(
            state=states[t["state"]], value=t["value"], params=t["external"], distributions=dists,
            user_attrs=t["attrs"], intermediate_values=t["curve"]))


def write_postgres(trials, path, study_id):
    """A psql script: the trials COPYed into Optuna's tables after the
    study's last trial (ids and numbers continue from there), the
    sequences moved past the ids given."""
    dists = {k: json.dumps(dist(k)) for k in ("lr", "batch_size", "width")}
    states = {1: "COMPLETE", 2: "PRUNED", 3: "FAIL"}
    tables = {"trials": [], "trial_params": [], "trial_values": [], "trial_intermediate_values": [],
              "trial_user_attributes": [], "trial_system_attributes": []}

    def text(v):  # COPY's text format: tab-separated, backslashes doubled.
        return "\\N" if v is None else str(v).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")

    for n, t in enumerate(trials):
        tables["trials"].append((n, n, states[t["state"]], iso(t["start"]), iso(t["complete"])))
        for k, v in t["internal"].items():
            tables["trial_params"].append((n, k, float(v), dists[k]))
        if t["value"] is not None:
            tables["trial_values"].append((n, 0, t["value"], "FINITE"))
        for step, v in t["curve"].items():
            tables["trial_intermediate_values"].append((n, step, v, "FINITE"))
        for k, v in t["attrs"].items():
            tables["trial_user_attributes"].append((n, k, json.dumps(v)))
        # The token `train sweep` claims a trial with: the sweep's own.
        tables["trial_system_attributes"].append((n, "trainguard:claim", json.dumps(str(uuid.uuid4()))))
    cols = {"trials": "trial_id, number, state, datetime_start, datetime_complete",
            "trial_params": "trial_id, param_name, param_value, distribution_json",
            "trial_values": "trial_id, objective, value, value_type",
            "trial_intermediate_values": "trial_id, step, intermediate_value, intermediate_value_type",
            "trial_user_attributes": "trial_id, key, value_json",
            "trial_system_attributes": "trial_id, key, value_json"}
    with open(path, "w") as f:
        f.write(f"SELECT (SELECT coalesce(max(trial_id), 0) + 1 FROM trials) AS first, "
                f"(SELECT count(*) FROM trials WHERE study_id = {study_id}) AS number \\gset\n")
        # Each table through a staging copy whose trial column is the
        # generated trial's index, then shifted to the study's ids.
        for table, rows in tables.items():
            f.write(f"CREATE TEMP TABLE g_{table} AS SELECT {cols[table]} FROM {table} WITH NO DATA;\n")
            f.write(f"COPY g_{table} ({cols[table]}) FROM STDIN;\n")
            for r in rows:
                f.write("\t".join(text(v) for v in r) + "\n")
            f.write("\\.\n")
        f.write(f"INSERT INTO trials (study_id, {cols['trials']}) SELECT {study_id}, trial_id + :first, "
                f"number + :number, state, datetime_start, datetime_complete FROM g_trials ORDER BY trial_id;\n")
        for table in list(tables)[1:]:
            f.write(f"INSERT INTO {table} ({cols[table]}) SELECT trial_id + :first, "
                    f"{cols[table].split(', ', 1)[1]} FROM g_{table};\n")
        f.write("SELECT setval('trials_trial_id_seq', (SELECT max(trial_id) FROM trials));\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, required=True)
    ap.add_argument("--out", required=True, help="the journal file to write (replaced)")
    ap.add_argument("--name", default="s", help="the study's name")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--optuna", action="store_true", help="write it through Optuna itself")
    ap.add_argument("--postgres", type=int, metavar="STUDY_ID",
                    help="write a psql script that adds the trials to this study in Optuna's tables")
    ap.add_argument("--interrupted", type=float, default=0.02,
                    help="the share of trials interrupted (a resume runs them again)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    t0 = datetime.datetime(2026, 11, 1)
    trials = [trial(rng, n, t0 + datetime.timedelta(seconds=10 * n), a.interrupted) for n in range(a.trials)]
    if os.path.exists(a.out):
        os.remove(a.out)
    if a.postgres is not None:
        write_postgres(trials, a.out, a.postgres)
    else:
        (write_optuna if a.optuna else write_ours)(trials, a.out, a.name)
    print(f"gen_study: {a.trials} trials in {a.out} ({os.path.getsize(a.out) >> 20} MiB)", file=sys.stderr)


if __name__ == "__main__":
    main()
