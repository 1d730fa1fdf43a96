"""Optuna's own numbers for sweep/tests/tpe_optuna.rs: the Parzen estimator's
log density on fixed observations (one parameter, and several jointly),
default_weights, default_gamma and _split_trials on a fixed study (running
trials included, as the constant liar passes them). Prints one JSON document.

`bayes` is Optuna 5.0.0's default TPESampler() (multivariate, constant_liar:
the joint estimators and the split with running trials); `bayes: {variant:
univariate}` is Optuna 4.x's default, TPESampler(multivariate=False,
constant_liar=False) in Optuna 5 (the one-parameter estimators)."""

import json
import math
import sys
import warnings

try:
    import numpy as np
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    from optuna.samplers._tpe.parzen_estimator import _ParzenEstimator, _ParzenEstimatorParameters
    from optuna.samplers._tpe.sampler import _split_trials, default_gamma, default_weights
    from optuna.trial import TrialState, create_trial
except ImportError as e:
    sys.exit(f"optuna is missing ({e}): run just setup")
if int(optuna.__version__.split(".")[0]) < 5:
    sys.exit(f"optuna {optuna.__version__} is older than the 5.0.0 this compares with: run just setup")

optuna.logging.set_verbosity(optuna.logging.ERROR)
warnings.filterwarnings("ignore")
# The sampler `bayes` is, every option that Optuna 5 changed named; its
# estimators' knobs are what the estimators below are built with (Optuna 5
# no longer reads their `multivariate`: per parameter, they are univariate).
SAMPLER = optuna.samplers.TPESampler(
    multivariate=False, constant_liar=False, n_startup_trials=10, n_ei_candidates=24)
DEFAULT = optuna.samplers.TPESampler()
PARAMS = SAMPLER._parzen_estimator_parameters
assert DEFAULT._parzen_estimator_parameters == PARAMS
assert PARAMS == _ParzenEstimatorParameters(
    prior_weight=1.0, consider_magic_clip=True, consider_endpoints=False,
    weights=default_weights, multivariate=PARAMS.multivariate), PARAMS


def spec(d, raw_high=None):
    if isinstance(d, CategoricalDistribution):
        return {"type": "categorical", "n": len(d.choices)}
    kind = "int" if isinstance(d, IntDistribution) else "float"
    return {"type": kind, "low": d.low, "high": raw_high or d.high, "log": d.log, "step": d.step}


rng = np.random.RandomState(0)
cases = [
    (FloatDistribution(-5, 5), [-4.9, -1.0, 0.0, 0.1, 3.3], [-5, -4.95, -2, 0.05, 2.5, 5]),
    (FloatDistribution(1e-5, 1e-1, log=True), [1e-4, 3e-4, 2e-3, 2e-3, 5e-2, 9e-2],
     [1e-5, 2e-5, 1e-4, 1e-3, 1e-2, 0.1]),
    (FloatDistribution(0, 1, step=0.1), [0.0, 0.2, 0.2, 0.7, 1.0], [0.0, 0.1, 0.2, 0.5, 0.9, 1.0]),
    # Optuna lowers high to 1.0; the Rust side gets 1.05 and must do the same.
    (FloatDistribution(0, 1.05, step=0.1), [0.3, 0.9], [0.0, 0.4, 1.0], 1.05),
    (IntDistribution(1, 9, step=2), [1, 3, 3, 9], [1, 3, 5, 7, 9]),
    (IntDistribution(1, 1024, log=True), [1, 2, 16, 17, 700], [1, 2, 3, 64, 1000, 1024]),
    (CategoricalDistribution(["a", "b", "c", "d"]), [0, 2, 2, 3], [0, 1, 2, 3]),
    (FloatDistribution(-10, 10), [], [-10, 0, 7]),
    (CategoricalDistribution([1, 2, 3]), [], [0, 2]),
    # 40 observations: the ramp of weights, ties, and kernels whose far tail
    # goes through log_ndtr's asymptotic series.
    (FloatDistribution(0, 100), list(np.round(rng.uniform(0, 3, 38), 1)) + [1.5, 1.5],
     [0, 0.7, 1.5, 2.9, 40, 99.9, 100]),
    (IntDistribution(0, 1000), list(rng.randint(0, 10, 40)), [0, 3, 9, 500, 1000]),
    (FloatDistribution(1e-3, 1e3, log=True), list(np.exp(rng.uniform(-2, 2, 30))),
     [1e-3, 0.5, 1, 5, 999]),
]
estimators = []
for d, obs, xs, *raw_high in cases:
    obs = [d.to_internal_repr(o) if not isinstance(d, CategoricalDistribution) else o for o in obs]
    pe = _ParzenEstimator({"x": np.asarray(obs, dtype=float)}, {"x": d}, PARAMS)
    lp = pe.log_pdf({"x": np.asarray(xs, dtype=float)})
    estimators.append({"dist": spec(d, *raw_high), "observations": [float(o) for o in obs],
                       "xs": [float(x) for x in xs], "log_pdf": [float(v) for v in lp]})

# Several parameters jointly (multivariate): a mixture of products; the
# observations are rows (one trial each), the points too. Past 16
# observations, no numerical value twice: which of two tied kernels gets
# which bandwidth follows numpy's argsort, unstable there (and
# SIMD-dependent), ours stable; jointly that pairing shows.
joint_space = {"x": FloatDistribution(-5, 5), "lr": FloatDistribution(1e-5, 1e-1, log=True),
               "k": IntDistribution(1, 99, step=2), "c": CategoricalDistribution(["a", "b", "c"])}
joint_cases = [
    ([[-4.9, 1e-4, 1, 0], [0.0, 2e-3, 3, 2], [0.1, 2e-3, 3, 2], [3.3, 9e-2, 9, 1]],
     [[-5, 1e-5, 1, 0], [0.05, 2e-3, 3, 2], [3.3, 1e-4, 9, 2], [5, 0.1, 5, 1]]),
    ([], [[0, 1e-3, 5, 1], [-2, 1e-5, 1, 0]]),
    ([[x, math.exp(-7 - x / 2), 1 + 2 * i, i % 3]
      for i, x in enumerate(np.round(rng.uniform(-5, 5, 30), 2))],
     [[0, 1e-3, 5, 1], [-4, 0.05, 9, 0], [4.9, 2e-5, 3, 2]]),
]
joint = []
names = list(joint_space)
for rows, xs in joint_cases:
    obs = {n: np.asarray([r[i] for r in rows], dtype=float) for i, n in enumerate(names)}
    pe = _ParzenEstimator(obs, joint_space, PARAMS)
    lp = pe.log_pdf({n: np.asarray([x[i] for x in xs], dtype=float) for i, n in enumerate(names)})
    joint.append({"dists": [spec(joint_space[n]) for n in names], "observations": rows,
                  "xs": xs, "log_pdf": [float(v) for v in lp]})

# A study mixing every state, values with ties, pruned trials at several
# steps (one with a NaN last value, one with none).
trials = [
    ("COMPLETE", 3.0, {}), ("COMPLETE", 1.0, {}), ("PRUNED", None, {0: 0.1, 1: 0.5}),
    ("PRUNED", None, {0: 0.2, 1: 0.4}), ("FAIL", None, {}), ("COMPLETE", 1.0, {}),
    ("RUNNING", None, {}), ("PRUNED", None, {0: 0.0}), ("PRUNED", None, {}),
    ("COMPLETE", -2.5, {}), ("PRUNED", None, {0: 0.3, 1: float("nan")}), ("COMPLETE", 7.0, {}),
    ("PRUNED", None, {0: 9.0, 1: 0.4}), ("COMPLETE", 0.5, {}),
]
splits = []
for direction in ("minimize", "maximize"):
    study = optuna.create_study(direction=direction)
    for state, value, inter in trials:
        study.add_trial(create_trial(state=TrialState[state], value=value,
                                     intermediate_values=inter, params={}, distributions={}))
    for liar in (False, True):
        # What TPESampler._sample passes: with constant_liar, RUNNING too.
        states = (TrialState.COMPLETE, TrialState.PRUNED) + ((TrialState.RUNNING,) if liar else ())
        frozen = study.get_trials(deepcopy=False, states=states)
        for n_below in range(0, 13):
            below, above = _split_trials(study, frozen, n_below)
            splits.append({"direction": direction, "n_below": n_below, "liar": liar,
                           "below": [t.number for t in below], "above": [t.number for t in above]})

json.dump({
    "sampler": {"multivariate": SAMPLER._is_multivariate(optuna.create_study()), "constant_liar": SAMPLER._constant_liar,
                "n_startup_trials": SAMPLER._n_startup_trials, "n_ei_candidates": SAMPLER._n_ei_candidates,
                "prior_weight": PARAMS.prior_weight, "consider_magic_clip": PARAMS.consider_magic_clip,
                "consider_endpoints": PARAMS.consider_endpoints},
    "default": {"multivariate": DEFAULT._is_multivariate(optuna.create_study()),
                "constant_liar": DEFAULT._constant_liar, "group": DEFAULT._group,
                "n_startup_trials": DEFAULT._n_startup_trials,
                "n_ei_candidates": DEFAULT._n_ei_candidates},
    "estimators": estimators,
    "joint": joint,
    "weights": {str(n): default_weights(n).tolist() for n in (0, 1, 24, 25, 26, 27, 40, 100)},
    "gamma": {str(n): default_gamma(n) for n in (0, 1, 9, 10, 11, 100, 249, 251, 1000)},
    "trials": [{"state": s, "value": v, "intermediate": [[k, x if not math.isnan(x) else "nan"]
                                                          for k, x in i.items()]}
               for s, v, i in trials],
    "splits": splits,
}, sys.stdout)
