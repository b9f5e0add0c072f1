#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what it needs, builds, and runs
#   1. every ctest suite (labels unit, numeric, integration, learning) on a Release build with
#      -Werror;
#   2. the `unit` label again on an AddressSanitizer+UBSan build (it includes the bad-input corpus);
#   3. the libFuzzer targets for a bounded time (clang), as ctest label `fuzz`.
# Exits non-zero on any failure; ends with ctest's summary lines and one total line.
# Knobs: RL_JOBS (parallel build/test jobs, default nproc), RL_FUZZ_SECONDS (per target, default 30).
set -uo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
jobs="${RL_JOBS:-$(nproc)}"
fuzz_s="${RL_FUZZ_SECONDS:-30}"

bash scripts/setup.sh --tests || { echo "test: setup failed"; exit 1; }
bash tests/reference/fetch_tokenizers.sh || { echo "test: could not fetch the third-party tokenizers"; exit 1; }
bash tests/reference/fetch_openai.sh || { echo "test: could not fetch the openai npm client"; exit 1; }

status=0
total_pass=0
total_fail=0
total_skip=0
summaries=()

# run_stage <name> <build dir> <ctest label regex or ""> <cmake args...>
run_stage() {
  local name=$1 dir=$2 label=$3; shift 3
  echo "=== $name: configure + build ($dir)"
  if ! cmake -S "$root" -B "$dir" "$@" >"$dir.configure.log" 2>&1; then
    cat "$dir.configure.log"; echo "test: $name: configure failed"; status=1; total_fail=$((total_fail+1)); return
  fi
  if ! cmake --build "$dir" -j "$jobs" 2>&1 | tail -n 40; then :; fi
  if [ "${PIPESTATUS[0]}" -ne 0 ]; then
    echo "test: $name: build failed"; status=1; total_fail=$((total_fail+1)); return
  fi
  echo "=== $name: ctest ${label:+-L $label}"
  local log="$dir.ctest.log"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" ${label:+-L "$label"} 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local line; line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" | tail -n 1)
  if [ -z "$line" ]; then
    echo "test: $name: ctest printed no summary"; status=1; total_fail=$((total_fail+1)); return
  fi
  # ctest counts a skipped test (exit 77: a gpu suite without a GPU) among those that "passed";
  # it lists them under "The following tests did not run" and they are counted apart here
  local failed all skipped
  failed=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
  all=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/')
  skipped=$(grep -cE '^[[:space:]]+[0-9]+ - .* \(Skipped\)$' "$log")
  if [ "$skipped" -gt 0 ]; then
    summaries+=("$name: $line ($skipped of them skipped)")
  else
    summaries+=("$name: $line")
  fi
  total_fail=$((total_fail + failed))
  total_skip=$((total_skip + skipped))
  total_pass=$((total_pass + all - failed - skipped))
  [ "$rc" -eq 0 ] || status=1
}

mkdir -p build
run_stage release build/release "" -DCMAKE_BUILD_TYPE=Release -DRL_WERROR=ON
run_stage sanitize build/sanitize unit -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRL_WERROR=ON \
  -DRL_SANITIZE=address,undefined
run_stage fuzz build/fuzz fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DRL_FUZZ=ON -DRL_FUZZ_SECONDS="$fuzz_s"

echo
echo "=== summary"
for s in "${summaries[@]}"; do echo "$s"; done
echo "total: $total_pass passed, $total_fail failed, $total_skip skipped (gpu suites without a GPU)"
exit $status
