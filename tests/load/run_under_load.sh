#!/usr/bin/env bash
# Run the parallel tests beside CPU hogs: they must stay green on a loaded machine (issue 20).
#
#   tests/load/run_under_load.sh [HOGS] [-- extra pytest arguments]
#
# Starts HOGS (default 4) busy-loop Python processes, runs
#   python -m pytest -q tests/parallel tests/pipeline tests/workers -k "parallel or workers"
# (every test of parallel sources: the room tests/parallel, the pipeline's and its checkpoints'
# tests with parallel sources; and the worker pools' tests: -k matches a folder's name too)
# beside them, then the long searches, still beside them:
#   python -m pytest -q tests/model tests/parallel/test_engine_state_machine.py
# with DALI_LITE_MODEL_EXAMPLES generated programs and engine runs each (default 1000 here,
# 25 in the suite: the bugs those searches exist for took 100-600 examples to find). It kills
# the hogs on any exit (success, failure, Ctrl-C, SIGTERM).
# PYTHON picks the interpreter (default: python3); the exit status is the first failing
# pytest's (the long searches run only when the parallel tests passed).
set -euo pipefail

HOGS="${1:-4}"
shift $(( $# > 0 ? 1 : 0 ))
if [[ "${1:-}" == "--" ]]; then shift; fi
PYTHON="${PYTHON:-python3}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

hog_pids=()
pytest_pid=""
cleanup() {
    # pytest first (if a signal cut the run short; its own fixtures end its workers), then
    # the hogs. Only the processes this script started, by pid.
    if [[ -n "$pytest_pid" ]] && kill -0 "$pytest_pid" 2>/dev/null; then
        kill -INT "$pytest_pid" 2>/dev/null || true
        wait "$pytest_pid" 2>/dev/null || true
    fi
    if (( ${#hog_pids[@]} )); then
        kill "${hog_pids[@]}" 2>/dev/null || true
        wait "${hog_pids[@]}" 2>/dev/null || true
        hog_pids=()
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq "$HOGS"); do
    "$PYTHON" -c 'while True: pass' &
    hog_pids+=("$!")
done
echo "run_under_load: ${HOGS} CPU hogs (pids ${hog_pids[*]}) on $(nproc) cores" >&2

cd "$ROOT"
# Each pytest in the background and waited for: bash runs a trap only once a foreground command
# ends, so a SIGTERM (e.g. from `timeout`) would otherwise leave the hogs spinning until pytest
# is done.
run_pytest() {
    "$PYTHON" -m pytest -q "$@" &
    pytest_pid=$!
    local status=0
    wait "$pytest_pid" || status=$?
    pytest_pid=""
    echo "run_under_load: pytest $1... exited with ${status}; load average:" \
        "$(cut -d' ' -f1-3 /proc/loadavg)" >&2
    return "$status"
}
status=0
run_pytest tests/parallel tests/pipeline tests/workers -k "parallel or workers" "$@" || status=$?
if (( status == 0 )); then
    DALI_LITE_MODEL_EXAMPLES="${DALI_LITE_MODEL_EXAMPLES:-1000}" \
        run_pytest tests/model tests/parallel/test_engine_state_machine.py "$@" || status=$?
fi
exit "$status"
