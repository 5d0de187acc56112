#!/usr/bin/env bash
# A short GPU session: the parts of `make gpu-check` in the order that matters most, each given what is left of one
# budget, so that a lent GPU's few minutes end with a report (tools/gpu_check.py writes it after every part that
# finishes; a part cut off by the budget records nothing) rather than with nothing saved.
#
#   tools/gpu_session.sh            # round 1, 540 s: every notebook (5 at a time), the GPT against nanoGPT (A/A twin,
#                                   # time to 1.47), the profile, each attention kernel, the training chapters in
#                                   # float16 (the path a GPU without bfloat16, such as a T4, takes)
#   tools/gpu_session.sh 540 2      # round 2: the Transformer against nn.Transformer, the compiled GPT, then chapter
#                                   # 08's full recipe
#
# Round 1 starts a new report: the previous one moves to benchmarks/gpu/<its date and GPU>/, so that no figure of
# another machine or of older code is reported under this one's name. Commit benchmarks/gpu/ afterwards; the README's
# GPU row and benchmarks/README.md's GPU rows are filled from report.md. Exits non-zero if any part failed.
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${1:-540}
round=${2:-1}
start=$SECONDS
failed=0

python3 tools/gpu_check.py --preflight || exit 2
if [ "$round" = 1 ] && [ -f benchmarks/gpu/report.json ]; then
    old=$(python3 -c 'import json, re; e = json.load(open("benchmarks/gpu/report.json")).get("environment", {}); print(re.sub(r"\W+", "-", e.get("date", "undated") + " " + e.get("gpu", "gpu")).strip("-"))')
    mkdir -p "benchmarks/gpu/$old" && mv benchmarks/gpu/report.json benchmarks/gpu/report.md "benchmarks/gpu/$old/"
    echo "--- the previous report moved to benchmarks/gpu/$old/"
fi

part() {  # part PARTS [extra gpu_check.py arguments]: run it with what is left of the budget, 15 s kept in hand
    local left=$((budget - (SECONDS - start) - 15))
    if [ "$left" -lt 60 ]; then
        echo "--- $1: skipped, $((left + 15)) s left of ${budget}"
        return
    fi
    echo "--- $1 (${left} s)"
    timeout --signal=INT --kill-after=10 "$left" make gpu-check PARTS="$1" GPU_CHECK_ARGS="${2:-}"
    local status=$?
    if [ "$status" -ne 0 ]; then
        echo "--- $1 ended with exit code $status after $((SECONDS - start)) s"
        failed=1
    fi
}

if [ "$round" = 1 ]; then
    part notebooks "--jobs 5"
    part bench-gpt
    part profile-gpt
    part bench-gpt-kernels
    part notebooks-float16 "--jobs 4"
else
    part bench-transformer
    part bench-gpt-compiled
    part translator
fi
echo "GPU session round ${round} done after $((SECONDS - start)) s"
exit $failed
