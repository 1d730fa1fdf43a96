#!/usr/bin/env bash
# Two builds of `train` read the same journals side by side: `--report
# --format json` and `--status` of each file, the builds alternating in each
# of N rounds (default 5); the median wall seconds, CPU seconds (user +
# system, every thread) and peak RSS of each.
# What a change to the journal's reader gained, on the same files and
# machine in one run (bench/gen_study.py writes the files). A database's
# URL in the place of a journal reads its study $STUDY (default s), the
# password from PGPASSFILE.
#
#   N=5 bench/ab_readers.sh OLD_TRAIN NEW_TRAIN JOURNAL_OR_URL...
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
old=$1 new=$2
shift 2
rounds=${N:-5}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
measure() { # BIN ARGS... -> "seconds kilobytes cpu_seconds"
    local out
    out=$(mktemp)
    /usr/bin/time -f '%e %M %U %S' -o "$out" "$@" >/dev/null 2>&1
    tail -n 1 "$out" | awk '{print $1, $2, $3 + $4}'
    rm -f "$out"
}
echo "| journal | reader | old s | new s | old/new | old CPU s | new CPU s | old RSS MiB | new RSS MiB |"
echo "|---|---|---|---|---|---|---|---|---|"
for f in "$@"; do
    src=("$f")
    [[ $f == *://* ]] && src=(--storage "$f" --study "${STUDY:-s}")
    for reader in --report --status; do
        extra=()
        [ "$reader" = --report ] && extra=(--format json)
        ts=() ms=() cs=() tn=() mn=() cn=()
        for _ in $(seq "$rounds"); do
            read -r t m c < <(measure "$old" sweep "$reader" "${src[@]}" "${extra[@]}")
            ts+=("$t") ms+=("$m") cs+=("$c")
            read -r t m c < <(measure "$new" sweep "$reader" "${src[@]}" "${extra[@]}")
            tn+=("$t") mn+=("$m") cn+=("$c")
        done
        o=$(median "${ts[@]}") n=$(median "${tn[@]}")
        printf '| %s | %s | %s | %s | %.2fx | %s | %s | %d | %d |\n' "$(basename "$f")" "$reader" "$o" "$n" \
            "$(awk "BEGIN {print $o / $n}")" "$(median "${cs[@]}")" "$(median "${cn[@]}")" \
            $(($(median "${ms[@]}") / 1024)) $(($(median "${mn[@]}") / 1024))
    done
done
