#!/usr/bin/env bash
# What the journal's replay checkpoint saves a worker joining a large sweep,
# and `--status` / `--report` of it: one build of `train` on fresh copies of
# the same sweep directory in four states, alternating in each of N rounds
# (default 5): OLD_TRAIN with no checkpoint (the build before checkpoints),
# NEW_TRAIN with none, with a fresh one (as a driver leaves at its end),
# and with one that stands for the journal's first 80% (the stalest a
# running sweep's drivers leave: they write one each time the journal has
# grown by a quarter), made by sweep/examples/checkpoint_at.rs. Joining:
# seconds from `train sweep --resume` to its first new trial's folder.
# The sweep directory is one bench/benchlib.py's `generated_sweep` writes.
#
#   N=5 bench/join_checkpoint.sh OLD_TRAIN NEW_TRAIN CHECKPOINT_AT SWEEP_PARENT_DIR
set -euo pipefail
[ $# -eq 4 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
old=$1 new=$2 at=$3 src=$4
rounds=${N:-5}
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The three starting points, each a copy of the sweep.
for state in none fresh at80; do
    cp -r "$src" "$work/$state"
    rm -f "$work/$state/s/journal.log.checkpoint"
done
"$at" "$work/fresh/s/journal.log" s 1.0 >/dev/null
"$at" "$work/at80/s/journal.log" s 0.8 >/dev/null
# shellcheck source=bench/joinlib.sh
. "$(dirname "$0")/joinlib.sh"
read_once() { # BIN STATE READER [ARGS...] -> seconds
    local bin=$1 state=$2 reader=$3 t0 t1
    shift 3
    t0=$(date +%s.%N)
    (cd "$work/$state" && "$bin" sweep "$reader" s "$@" >/dev/null) ||
        { echo "$bin sweep $reader s $* failed" >&2; exit 1; }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
rows=("old none" "new none" "new fresh" "new at80")
declare -A join status report
for _ in $(seq "$rounds"); do
    for row in "${rows[@]}"; do
        set -- $row
        bin=$old; [ "$1" = new ] && bin=$new
        join[$row]+="$(join_once "$bin" "$work/$2") "
        status[$row]+="$(read_once "$bin" "$2" --status) "
        report[$row]+="$(read_once "$bin" "$2" --report --format json) "
    done
done
echo "| build | checkpoint | join s | --status s | --report s | join, all rounds |"
echo "|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
    set -- $row
    # shellcheck disable=SC2086
    echo "| $1 | $2 | $(median ${join[$row]}) | $(median ${status[$row]}) | $(median ${report[$row]}) | ${join[$row]}|"
done
