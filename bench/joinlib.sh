# Sourced by bench/ab_join.sh and bench/join_checkpoint.sh: the seconds a
# worker joining a large sweep waits, from `train sweep --resume` starting
# on a fresh copy of a sweep directory to its first new trial's folder.
# Needs $work (a scratch directory) and $python (the trials' interpreter).

# join_once BIN SWEEP_PARENT_DIR -> seconds
join_once() {
    rm -rf "$work/d" && cp -r "$2" "$work/d" && sync
    local before after t0 t1
    before=$(ls "$work/d/s/trials" | wc -l)
    t0=$(date +%s.%N)
    (cd "$work/d" && exec "$1" sweep --interpreter "$python" --parallel 4 --resume s >/dev/null 2>&1) &
    local pid=$!
    while after=$(ls "$work/d/s/trials" | wc -l); [ "$after" -le "$before" ]; do sleep 0.005; done
    t1=$(date +%s.%N)
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "$t1 - $t0" | bc
}

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
