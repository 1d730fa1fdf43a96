#!/usr/bin/env bash
# Two builds of `train` read the same journals side by side: `--report
# --format json` and `--status` of each file, the builds alternating in each
# of N rounds (default 5); the median wall seconds and peak RSS of each.
# What a change to the journal's reader gained, on the same files and
# machine in one run (bench/gen_study.py writes the files).
#
#   N=5 bench/ab_readers.sh OLD_TRAIN NEW_TRAIN JOURNAL...
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
old=$1 new=$2
shift 2
rounds=${N:-5}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
measure() { # BIN ARGS... -> "seconds kilobytes"
    local out
    out=$(mktemp)
    /usr/bin/time -f '%e %M' -o "$out" "$@" >/dev/null 2>&1
    tail -n 1 "$out"
    rm -f "$out"
}
echo "| journal | reader | old s | new s | old/new | old RSS MiB | new RSS MiB |"
echo "|---|---|---|---|---|---|---|"
for f in "$@"; do
    for reader in --report --status; do
        extra=()
        [ "$reader" = --report ] && extra=(--format json)
        ts=() ms=() tn=() mn=()
        for _ in $(seq "$rounds"); do
            read -r t m < <(measure "$old" sweep "$reader" "$f" "${extra[@]}")
            ts+=("$t") ms+=("$m")
            read -r t m < <(measure "$new" sweep "$reader" "$f" "${extra[@]}")
            tn+=("$t") mn+=("$m")
        done
        o=$(median "${ts[@]}") n=$(median "${tn[@]}")
        printf '| %s | %s | %s | %s | %.2fx | %d | %d |\n' "$(basename "$f")" "$reader" "$o" "$n" \
            "$(awk "BEGIN {print $o / $n}")" $(($(median "${ms[@]}") / 1024)) $(($(median "${mn[@]}") / 1024))
    done
done
