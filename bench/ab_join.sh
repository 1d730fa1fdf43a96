#!/usr/bin/env bash
# Two builds of `train` join the same large sweep side by side: the seconds
# from `train sweep --resume` starting on a fresh copy of the sweep
# directory to its first new trial's folder (what a worker joining the
# study waits: the journal's replay, the first folds, the claim), the
# builds alternating in each of N rounds (default 7); the median and the
# spread of each. The sweep directory is one bench/sweep_scale.py's
# `generated_sweep` writes (a program sweep of instant trials on top of
# bench/gen_study.py's study, its trial count past the study's).
#
#   N=7 bench/ab_join.sh OLD_TRAIN NEW_TRAIN SWEEP_PARENT_DIR
set -euo pipefail
[ $# -eq 3 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
old=$1 new=$2 src=$3
rounds=${N:-7}
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=bench/joinlib.sh
. "$(dirname "$0")/joinlib.sh"
to=() tn=()
for _ in $(seq "$rounds"); do
    to+=("$(join_once "$old" "$src")")
    tn+=("$(join_once "$new" "$src")")
done
o=$(median "${to[@]}") n=$(median "${tn[@]}")
echo "| build | first trial s (median of $rounds) | all |"
echo "|---|---|---|"
echo "| old | $o | $(printf '%s ' "${to[@]}") |"
echo "| new | $n | $(printf '%s ' "${tn[@]}") |"
printf 'old/new: %.2fx\n' "$(awk "BEGIN {print $o / $n}")"
