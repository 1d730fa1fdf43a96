#!/usr/bin/env bash
# The pre-commit hook as a user gets it (`just test-hook`, part of `just
# test`): the real pre-commit (pinned, in a scratch venv) installs this
# repository's .pre-commit-hooks.yaml at the committed HEAD, by local path and
# rev, into two fixture repositories, and `pre-commit run --all-files` must
# fail on the one whose script and model hold seed 001's pair (the finding
# on stdout as path:line:col) and pass on the clean one.
#
# The hook is `language: rust`: pre-commit runs `cargo install --path .`
# here, which builds cfgcheck (release profile). To keep this test short the
# build is at opt-level 0 and its target directory is kept in
# target/pre-commit, so a second run only relinks; a user's install is the
# optimised build.
#
# Environment: PRE_COMMIT_VERSION (the justfile's pin).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
version=${PRE_COMMIT_VERSION:?PRE_COMMIT_VERSION: the pre-commit version, which the justfile sets}
rev=$(git -C "$root" rev-parse HEAD)
if [ -n "$(git -C "$root" status --porcelain -- .pre-commit-hooks.yaml Cargo.toml packaging/pre-commit tools/cfgcheck diagnose common)" ]; then
    echo "test-hook: pre-commit installs the hook at HEAD ($rev), and the working tree's hook or cfgcheck differs from it: commit first to test your changes" >&2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet "pre-commit==$version"
pre_commit="$tmp/venv/bin/pre-commit"
export PRE_COMMIT_HOME="$tmp/cache"
export CARGO_TARGET_DIR="$root/target/pre-commit"
export CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=false
# The fixtures' own commits, whoever runs this.
export GIT_AUTHOR_NAME=test GIT_AUTHOR_EMAIL=test@example.invalid
export GIT_COMMITTER_NAME=test GIT_COMMITTER_EMAIL=test@example.invalid

passed=0
failed=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$1"; }
bad() { failed=$((failed + 1)); printf 'FAIL %s: %s\n' "$1" "$2"; }

# fixture NAME: a git repository using the hook at $rev, with the files
# written into it by the caller before `commit`.
fixture() {
    local dir="$tmp/$1"
    mkdir -p "$dir"
    git -C "$dir" init --quiet
    cat >"$dir/.pre-commit-config.yaml" <<YAML
repos:
  - repo: $root
    rev: $rev
    hooks:
      - id: cfgcheck-scan
YAML
}
commit() {
    git -C "$tmp/$1" add -A
    git -C "$tmp/$1" commit --quiet -m fixture
}

# Seed 001's pair in two files: the compile mode in train.py, the
# checkpointing in model.py.
fixture hazard
mkdir -p "$tmp/hazard/src"
cat >"$tmp/hazard/src/train.py" <<'PY'
import torch
from model import Net

model = torch.compile(Net(), mode="reduce-overhead")
PY
cat >"$tmp/hazard/src/model.py" <<'PY'
import torch
from torch.utils.checkpoint import checkpoint


class Net(torch.nn.Module):
    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
PY
commit hazard

fixture clean
cat >"$tmp/clean/train.py" <<'PY'
import torch

model = torch.compile(torch.nn.Linear(4, 4))
PY
commit clean

code=0
(cd "$tmp/hazard" && "$pre_commit" run --all-files) >"$tmp/hazard.out" 2>&1 || code=$?
if [ "$code" = 1 ] &&
    grep -qF './src/train.py:4:30: error[cuda-graphs-checkpointing] torch.compile mode "reduce-overhead" records CUDA graphs' "$tmp/hazard.out" &&
    grep -qF '(with ./src/model.py:7:16: activation checkpointing' "$tmp/hazard.out"; then
    ok "the hazard's repository fails with the finding at path:line:col"
else
    bad "hazard" "pre-commit exit $code; its output: $(tail -n 20 "$tmp/hazard.out")"
fi

code=0
(cd "$tmp/clean" && "$pre_commit" run --all-files) >"$tmp/clean.out" 2>&1 || code=$?
if [ "$code" = 0 ] && grep -qE '^cfgcheck --scan .*Passed$' "$tmp/clean.out"; then
    ok "the clean repository passes"
else
    bad "clean" "pre-commit exit $code; its output: $(tail -n 20 "$tmp/clean.out")"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
