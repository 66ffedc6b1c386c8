#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz.
#
#   scripts/fuzz.sh [options] [SECONDS_PER_TARGET] [TARGET...]
#
#   SECONDS_PER_TARGET  default 60
#   TARGET              fpdu_rx, frame, ... (tests/fuzz/fuzz_<TARGET>.c); default all
#   --merge             afterwards merge inputs that add coverage into the
#                       committed corpus tests/fuzz/corpus/<TARGET> (libFuzzer
#                       -merge=1: only new coverage, existing seeds kept;
#                       edges only, so the corpus stays small: set
#                       FUZZ_MERGE_ARGS= to count hit-count buckets too)
#   --seeds             regenerate the hand-made seeds (make_seeds) into
#                       tests/fuzz/corpus first
#   --jobs N            run N targets at once (default 1)
#   --build DIR         build directory (default build-fuzz)
#   FUZZ_ARGS="..."     extra libFuzzer flags, e.g. FUZZ_ARGS="-max_len=65600"
#
# Builds DIR with clang, -DUW_FUZZ=ON -DUW_SANITIZE=ON, then runs each fuzzer
# on a copy of its corpus in DIR/fuzz-work/<TARGET>, so the committed corpus
# changes only with --merge. Prints one summary line per target and exits
# non-zero if any target crashed; crashing inputs are kept under DIR/crashes/
# (reproduce with DIR/tests/fuzz/fuzz_<TARGET> FILE, or the replay_<TARGET>
# program of any build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

secs=60
merge=0
seeds=0
jobs=1
build=build-fuzz
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --merge) merge=1 ;;
    --seeds) seeds=1 ;;
    --jobs) jobs=$2; shift ;;
    --build) build=$2; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *)
      if [[ "$1" =~ ^[0-9]+$ ]] && [ ${#targets[@]} -eq 0 ]; then secs=$1; else targets+=("$1"); fi ;;
  esac
  shift
done
case "$build" in /*) ;; *) build="$ROOT/$build" ;; esac

if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do
    t=$(basename "$f" .c)
    targets+=("${t#fuzz_}")
  done
fi
for t in "${targets[@]}"; do
  [ -f "tests/fuzz/fuzz_$t.c" ] || { echo "fuzz.sh: no target $t (tests/fuzz/fuzz_$t.c)" >&2; exit 2; }
done

command -v clang >/dev/null || { echo "fuzz.sh: clang not found (scripts/deps.sh installs it)" >&2; exit 1; }
echo "== configure and build $build"
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DUW_FUZZ=ON -DUW_SANITIZE=ON >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log" >&2; exit 1; }
build_targets=(make_seeds)
for t in "${targets[@]}"; do build_targets+=("fuzz_$t"); done
cmake --build "$build" -j "$(nproc)" --target "${build_targets[@]}"

if [ "$seeds" = 1 ]; then
  "$build/tests/fuzz/make_seeds" tests/fuzz/corpus
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/crashes"

# Runs one target; writes its summary line to work/summary.
run_target() {
  local t=$1 bin="$build/tests/fuzz/fuzz_$1" work="$build/fuzz-work/$1"
  rm -rf "$work"
  mkdir -p "$work/corpus"
  if [ -d "tests/fuzz/corpus/$t" ]; then cp -r "tests/fuzz/corpus/$t/." "$work/corpus/"; fi
  local rc=0
  # shellcheck disable=SC2086
  "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
         -artifact_prefix="$build/crashes/$t-" ${FUZZ_ARGS:-} "$work/corpus" \
         >"$work/log" 2>&1 || rc=$?
  local execs eps cov ft corp crashes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1 || true)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1 | awk '{print $2}' || true)
  ft=$(grep -o 'ft: [0-9]*' "$work/log" | tail -1 | awk '{print $2}' || true)
  corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$work/log" | tail -1 | awk '{print $2}' || true)
  crashes=$(grep -c '^artifact_prefix=.*Test unit written to' "$work/log" || true)
  local status=ok
  if [ "$rc" != 0 ]; then
    status="CRASH rc=$rc: $(grep -o 'Test unit written to .*' "$work/log" | tail -1 | sed 's/Test unit written to //' || true)"
    [ "$crashes" = 0 ] && crashes=1
  fi
  printf '%-16s %6ss  execs %-10s exec/s %-7s cov %-5s ft %-6s corpus %-10s crashes %s  %s\n' \
    "$t" "$secs" "${execs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$crashes" "$status" \
    >"$work/summary"
  if [ "$merge" = 1 ] && [ "$rc" = 0 ]; then
    mkdir -p "tests/fuzz/corpus/$t"
    # shellcheck disable=SC2086
    "$bin" -merge=1 ${FUZZ_MERGE_ARGS--use_counters=0} ${FUZZ_ARGS:-} "tests/fuzz/corpus/$t" \
           "$work/corpus" >"$work/merge.log" 2>&1 ||
      echo "merge failed for $t: see $work/merge.log" >>"$work/summary"
  fi
  return "$rc"
}

echo "== fuzzing ${targets[*]} for ${secs}s each, $jobs at a time"
failed=0
running=0
for t in "${targets[@]}"; do
  run_target "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done

echo "== summary"
for t in "${targets[@]}"; do cat "$build/fuzz-work/$t/summary"; done
if [ "$failed" != 0 ]; then
  echo "fuzz.sh: crash(es) found; inputs under $build/crashes/, logs in $build/fuzz-work/<target>/log" >&2
  exit 1
fi
