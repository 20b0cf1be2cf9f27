#!/usr/bin/env bash
# before-after.sh BEFORE [AFTER] [ROUNDS]: the intake and pacing benchmarks
# of two commits, side by side in one run, for BENCHMARKS.md.
#
# Each commit's test binaries (packages shaper and test) are built once in
# a temporary worktree; then every benchmark runs alternately on the two
# (before/after in odd rounds, after/before in even ones), so that load on
# the machine falls on both sides alike, and benchstat compares the sets.
# AFTER defaults to HEAD, ROUNDS to 6; BENCH (a regular expression over
# the benchmark names below) runs a subset. Output: the two raw files and
# benchstat's table, in a temporary directory that is printed at the end.
set -euo pipefail
before=${1:?usage: before-after.sh BEFORE [AFTER] [ROUNDS]}
after=${2:-HEAD}
rounds=${3:-6}
top=$(git rev-parse --show-toplevel)
out=$(mktemp -d)
benchstat="go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"

build() { # build NAME REV
  local dir="$out/$1"
  git -C "$top" worktree add -q --detach "$dir/src" "$2"
  (cd "$dir/src" && go test -c -o "$dir/shaper.test" ./shaper && go test -c -o "$dir/test.test" ./test)
}
cleanup() {
  for side in before after; do
    [ -d "$out/$side/src" ] && git -C "$top" worktree remove --force "$out/$side/src"
  done
  return 0
}
trap cleanup EXIT
build before "$before"
build after "$after"

# One line per benchmark: binary, name, benchtime.
benches=(
  "shaper.test BenchmarkPacing 1x"
  "shaper.test BenchmarkLanes10k 1x"
  "shaper.test BenchmarkSubmitParallel 500ms"
  "test.test BenchmarkIntake 7x"
  "test.test BenchmarkIntakeBackends 20000x"
  "test.test BenchmarkIntakeKVAdmission 5x"
)
run() { # run SIDE BIN NAME TIME; in the package's folder, as go test does
  (cd "$out/$1/src/${2%.test}" && "$out/$1/$2" -test.run '^$' -test.bench "^$3\$" -test.benchtime "$4" -test.benchmem) |
    grep -E '^(Benchmark|goos|goarch|pkg|cpu)' >>"$out/$1.txt"
}
for ((r = 1; r <= rounds; r++)); do
  echo "round $r of $rounds" >&2
  for b in "${benches[@]}"; do
    read -r bin name time <<<"$b"
    [[ $name =~ ${BENCH:-.} ]] || continue
    if ((r % 2)); then
      run before "$bin" "$name" "$time"; run after "$bin" "$name" "$time"
    else
      run after "$bin" "$name" "$time"; run before "$bin" "$name" "$time"
    fi
  done
done
(cd "$out" && $benchstat before.txt after.txt)
echo "raw results: $out/before.txt $out/after.txt" >&2
