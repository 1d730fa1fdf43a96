#!/usr/bin/env bash
# The fuzzers of every parser a user can feed (fuzz/targets, libFuzzer
# through cargo-fuzz on nightly Rust; the checks are fuzz/props'):
#
#   scripts/fuzz/run.sh short   # `just test`: each target for SECONDS (10)
#   scripts/fuzz/run.sh long    # `just fuzz`: each target for RUNS (1e6) inputs
#
# Each target starts from the checked-in corpus (fuzz/corpus/TARGET) and
# keeps what it finds in fuzz/work/ (not checked in). An input that breaks a
# check stops the run with its path: copy it to fuzz/regressions/TARGET/
# (`cargo test -p fuzz-props` replays it from then on) and fix the parser.
# Prints one line per target: executions, seconds, executions per second,
# peak RSS.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mode="${1:-short}"
runs="${RUNS:-1000000}"
seconds="${SECONDS_PER_TARGET:-10}"
targets=(config report space journal checkpoint_meta explain tensor_headers wire readers command verdict any_config scan)

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: SKIPPED: no nightly Rust toolchain here (libFuzzer's instrumentation needs it: rustup toolchain install nightly); the corpus and regressions were replayed on stable by cargo test -p fuzz-props" >&2
    [ "$mode" = short ] && exit 0
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz (cargo install cargo-fuzz --locked)" >&2
    cargo install cargo-fuzz --locked --quiet
fi
cargo +nightly fuzz build --fuzz-dir fuzz/targets -O -s none
bin=fuzz/targets/target/x86_64-unknown-linux-gnu/release
mkdir -p fuzz/work/artifacts
for t in "${targets[@]}"; do
    mkdir -p "fuzz/work/$t"
    case "$mode" in
        short) budget=(-max_total_time="$seconds") ;;
        long) budget=(-runs="$runs") ;;
        *) echo "usage: $0 short|long" >&2; exit 2 ;;
    esac
    log="fuzz/work/$t.log"
    start=$(date +%s.%N)
    if ! "$bin/$t" "fuzz/work/$t" "fuzz/corpus/$t" "${budget[@]}" -timeout=10 -rss_limit_mb=1024 \
        -artifact_prefix="fuzz/work/artifacts/$t-" -print_final_stats=1 >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        echo "fuzz: $t broke a check; the input is in fuzz/work/artifacts/$t-*: copy it to fuzz/regressions/$t/ and fix the parser" >&2
        exit 1
    fi
    end=$(date +%s.%N)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
    awk -v t="$t" -v n="$execs" -v s="$start" -v e="$end" -v r="$rss" \
        'BEGIN { printf "fuzz: %-15s %9d inputs in %6.1f s (%7.0f/s), peak RSS %s MB, 0 failures\n", t, n, e - s, n / (e - s), r }'
done
