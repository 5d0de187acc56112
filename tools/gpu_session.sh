#!/usr/bin/env bash
# A short GPU session: the parts of `make gpu-check` in the order that matters most, each given what is left of one
# budget, so that a lent GPU's few minutes end with a report (tools/gpu_check.py writes it after every part) rather
# than with a part cut off before it was saved.
#
#   tools/gpu_session.sh            # the first round, 540 s: every notebook (5 at a time), the GPT against nanoGPT
#                                   # (A/A twin, time to 1.47), the profile, each attention kernel, the float16 chapters
#   tools/gpu_session.sh 540 2      # the second round: chapter 08's full recipe, then the compiled GPT
#
# Commit benchmarks/gpu/report.json and report.md afterwards; the README's GPU row and benchmarks/README.md's GPU rows
# are filled from them.
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${1:-540}
round=${2:-1}
start=$SECONDS

part() {  # part "PARTS" [extra gpu_check.py arguments]: run it with what is left of the budget
    local left=$((budget - (SECONDS - start)))
    if [ "$left" -lt 30 ]; then
        echo "--- $1: skipped, ${left} s left of ${budget}"
        return
    fi
    echo "--- $1 (${left} s left)"
    timeout --signal=INT --kill-after=10 "$left" make gpu-check PARTS="$1" GPU_CHECK_ARGS="${2:-}" \
        || echo "--- $1 ended with exit code $? after $((SECONDS - start)) s"
}

if [ "$round" = 1 ]; then
    part notebooks "--jobs 5"
    part bench-gpt
    part profile-gpt
    part bench-gpt-kernels
    part notebooks-float16 "--jobs 4"
else
    part translator
    part bench-gpt-compiled
    part bench-transformer
fi
echo "GPU session round ${round} done after $((SECONDS - start)) s"
