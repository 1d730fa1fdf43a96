#!/usr/bin/env bash
# `just test-slurm`: `train sweep --slurm` on a real one-node Slurm cluster
# (Debian's slurm-wlm, started by scripts/slurm/cluster.sh and stopped by
# its pids at the end, whatever happens). A 12-trial CPU grid runs as an
# array of 3 workers. While they run, one task is cancelled as a user does
# (scancel: SIGTERM, its worker records the trial as interrupted and the live
# workers run it again) and one worker is killed as a crash would (SIGKILL to
# the batch step, `scancel --batch --signal=KILL`: its trial stays RUNNING in
# the journal and its train, in its own process group, is orphaned; a plain
# `scancel --signal=KILL` is not that: 22.05 sends SIGTERM first). Once Slurm has no task left,
# `--resume --slurm` sees that task gone from squeue and submits one worker
# for that trial. Optuna then loads the journal: every number once, nothing
# RUNNING, each grid point complete once. slurmctld itself is never killed
# (restarted, it re-queues finished tasks: the journal, not Slurm, is the
# truth).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
train="${TRAIN:-target/release/train}"
python="${PYTHON:-python}"
state="$(mktemp -d /tmp/trainguard-slurm.XXXXXX)"
trap 'scripts/slurm/cluster.sh down "$state"' EXIT
eval "$(scripts/slurm/cluster.sh up "$state")"
sweep="$state/shared/sweep"

say() { printf '\n\033[1m$ %s\033[0m\n' "$*" >&2; }
# wait_for WHAT SECONDS COMMAND...: polls COMMAND until it succeeds.
wait_for() {
    local what="$1" limit="$2" t=0
    shift 2
    until "$@" >/dev/null 2>&1; do
        if ((t >= limit * 2)); then
            echo "test-slurm: gave up after ${limit}s waiting for $what" >&2
            "$train" sweep --status "$sweep" >&2 || true
            squeue --me -r >&2 || true
            tail -n 20 "$sweep"/slurm/*.out >&2 || true
            exit 1
        fi
        sleep 0.5
        t=$((t + 1))
    done
}
runs_a_trial() { "$train" sweep --status "$sweep" | grep -q "Slurm job $1 is RUNNING"; }
# A trial in its first epochs (of 20): killed now, it is surely mid-trial.
starts_a_trial() {
    "$train" sweep --status "$sweep" | grep -Eq "Slurm job $1 is RUNNING, train pid [0-9]+\), (no epoch yet|epoch [0-9]:)"
}
no_task_of() { [ -z "$(squeue --me --noheader -r -o %i | grep "^$1_" || true)" ]; }
job_ids() { sed -n 's/^ *- *job_id: *//p; s/^ *job_id: *//p' "$sweep/slurm.yaml" | tr -d "'\""; }

# More workers than MaxArraySize (1001, read from scontrol): two arrays.
split="$state/shared/split"
say "train sweep ... --trials 1500 --out $split --slurm --array 1500 --dry-run"
"$train" sweep --config configs/sweeps/demo_base.yaml --space configs/sweeps/tiny_cpu.yaml \
    --trials 1500 --out "$split" --slurm --array 1500 --dry-run >/dev/null
for want in "1:0-1000" "2:0-498"; do
    if ! grep -qx "#SBATCH --array=${want#*:}" "$split/slurm/workers-${want%%:*}.sbatch"; then
        echo "test-slurm: workers-${want%%:*}.sbatch should hold --array=${want#*:}" >&2
        exit 1
    fi
done
[ ! -e "$split/slurm/workers-3.sbatch" ]

say "train sweep --config configs/sweeps/demo_base.yaml --space configs/sweeps/slurm_grid.yaml --out $sweep --slurm --array 3 --time 10"
"$train" sweep --config configs/sweeps/demo_base.yaml --space configs/sweeps/slurm_grid.yaml \
    --out "$sweep" --slurm --array 3 --time 10
job="$(job_ids | head -n 1)"

both_run_a_trial() { runs_a_trial "${job}_1" && starts_a_trial "${job}_2"; }
wait_for "tasks ${job}_1 and ${job}_2 to run a trial" 300 both_run_a_trial
say "scancel ${job}_1; scancel --batch --signal=KILL ${job}_2   # each while its task runs a trial"
scancel "${job}_1"
scancel --batch --signal=KILL "${job}_2"

wait_for "job $job to leave squeue" 600 no_task_of "$job"
say "train sweep --status $sweep"
"$train" sweep --status "$sweep"

left="$("$train" sweep --status "$sweep")"
if ! grep -q "RUNNING in the journal but Slurm job ${job}_2 is no longer in squeue" <<<"$left"; then
    echo "test-slurm: the killed task ${job}_2 should have left its trial RUNNING:" >&2
    echo "$left" >&2
    exit 1
fi
say "train sweep --resume $sweep --slurm"
"$train" sweep --resume "$sweep" --slurm
jobs="$(job_ids | wc -l)"
if [ "$jobs" -ne 2 ]; then
    echo "test-slurm: --resume --slurm should have submitted one more job for the killed task's trial; slurm.yaml lists $jobs" >&2
    exit 1
fi
again="$(job_ids | tail -n 1)"
wait_for "job $again to leave squeue" 300 no_task_of "$again"

say "train sweep --resume $sweep --slurm   # nothing left"
"$train" sweep --resume "$sweep" --slurm
say "train sweep --report $sweep"
"$train" sweep --report "$sweep" --format table
say "python scripts/slurm/check_sweep.py $sweep sweep 12"
"$python" scripts/slurm/check_sweep.py "$sweep" sweep 12
