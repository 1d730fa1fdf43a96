"""Records how W&B's own agent expands sweep command macros, as fixtures
for supervise::command's tests (wandb_expansions.json beside this file).

It runs the real code path: wandb.wandb_agent.Agent._command_run, which
calls wandb/sdk/launch/sweeps/utils.py's create_sweep_command (the
${envvar:NAME} substitution) and create_sweep_command_args (the argument
forms), then substitutes whole-word macros; only the process start
(AgentProcess) is replaced by a recorder. Regenerate with:

    python3 -m venv /tmp/wb && /tmp/wb/bin/pip install wandb
    cd "$(mktemp -d)" && /tmp/wb/bin/python PATH/TO/wandb_expansions.py > PATH/TO/wandb_expansions.json
"""

import json
import os
import sys
from unittest import mock

import wandb
import wandb.wandb_agent as wandb_agent

# Every kind of value a sweep hands a trial, in one dict (W&B keeps the
# server's order; so do we).
PARAMS = {
    "lr": 0.001,
    "tiny": 1e-05,
    "big": 1e16,
    "whole": 2.0,
    "neg": -3,
    "batch_size": 32,
    "use_amp": True,
    "compile": False,
    "nothing": None,
    "optimizer": "adamw",
    "name": "resnet 50",
    "quote": "it's \"x\"",
    "unicode": "na\u00efve",
    "layers": [64, 128, "a", 0.5, True, None],
    "nested": {"depth": 2, "kind": "x", "ok": False},
    "empty_list": [],
}

MACROS = [
    "${env}",
    "${interpreter}",
    "${program}",
    "${args}",
    "${args_no_hyphens}",
    "${args_no_boolean_flags}",
    "${args_no_equals}",
    "${args_json}",
    "${args_append_hydra}",
    "${args_override_hydra}",
    "${args_json_file}",
]

COMMANDS = [
    None,
    [],
    *[[m] for m in MACROS],
    ["${envvar:TG_SET}", "--data=${envvar:TG_SET}/x", "${envvar:TG_UNSET}"],
    ["--lr=${args}", "${args}x", "plain", "${unknown_macro}"],
    ["${env}", "python3", "-u", "${program}", "--", "${args_no_hyphens}"],
]


class Recorder:
    last = None

    def __init__(self, command=None, env=None, **kwargs):
        Recorder.last = command

    def poll(self):
        return None


def expand(command, params):
    agent = wandb_agent.Agent(api=mock.MagicMock(), queue=None, sweep_id="s1")
    agent._sweep_command = list(command) if command is not None else []
    with mock.patch.object(wandb_agent, "AgentProcess", Recorder):
        agent._command_run(
            {
                "args": {k: {"value": v} for k, v in params.items()},
                "program": "train.py",
                "run_id": "r1",
            }
        )
    return Recorder.last


def main():
    os.environ["TG_SET"] = "/data"
    os.environ.pop("TG_UNSET", None)
    # The agent's ${args_json_file} is WANDB_DIR/wandb/sweep-ID/config-RUN.json.
    os.environ["WANDB_DIR"] = ""
    os.environ["WANDB_SWEEP_ID"] = "s1"
    out = sys.stdout
    out.write("{\n")
    out.write(f' "wandb": {json.dumps(wandb.__version__)},\n')
    out.write(' "program": "train.py",\n')
    out.write(' "interpreter": "python",\n')
    out.write(' "args_json_file": "wandb/sweep-s1/config-r1.json",\n')
    out.write(' "env": {"TG_SET": "/data"},\n')
    out.write(f' "params": {json.dumps([[k, v] for k, v in PARAMS.items()])},\n')
    out.write(' "cases": [\n')
    lines = []
    for with_params in (True, False):
        for command in COMMANDS:
            case = {
                "with_params": with_params,
                "command": command,
                "expansion": expand(command, PARAMS if with_params else {}),
            }
            lines.append("  " + json.dumps(case))
    out.write(",\n".join(lines))
    out.write("\n ]\n}\n")


if __name__ == "__main__":
    main()
