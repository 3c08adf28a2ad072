#!/usr/bin/env bash
# The GPU checks of the embedded engine and the one-process learner, in one go, most important first.
#
#     bash scripts/gpu_checks.sh OUT_DIR [MODEL]
#
# MODEL is a model name or directory (default: smollm2). ``random:DIR`` builds a model of DIR's config.json with
# random weights (seed 0) and DIR's tokenizer: the SmolLM2 architecture without its 98 MB of weights, for a
# machine they cannot reach. Throughput does not depend on the weights (every request samples exactly its
# tokens); the Sokoban episodes of the smoke runs are then noise that ends in format penalties.
#
# Steps (each under its own time limit; a failing step does not stop the next):
#   1. benchmarks/hf_engine.py: the engine's decode steps (graphs first, with each sampling noise source, then
#      dynamic and static) against plain batched ``generate`` at 64 and 16 rows and on the multi-turn
#      conversations, bf16;
#   2. pytest -m gpu for the engine (graphed, static and dynamic decode give the same tokens);
#   3. scripts/gpu_smoke.py with the default step's shape (LoRA 32, value head, 16 episodes): a separate bf16
#      engine (dynamic, then graphed decode), the colocated engine (dynamic, then graphed), the tiny model with
#      every weight training (bf16 compute), and a separate float32 engine.
# GPU_CHECKS_DEVICE=cpu runs the same steps on the CPU, small and without graphs: a check of this script itself.
# GPU_CHECKS_STEPS="engine_bench_graphs pytest_gpu" runs only the steps named; GPU_CHECKS_PROFILE=N adds a step,
# engine_profile: the graphed engine at 64 rows with the benchmark's --profile-loop N (the N functions of each
# engine's loop with the most own time, into checks.log; the profiler slows what it measures).
# Output: OUT_DIR/checks.log (every step's output) and OUT_DIR/results.jsonl (one JSON object per benchmark
# line or smoke run, with the step's name); a summary of the results is printed last.
set -u
out=${1:?usage: bash scripts/gpu_checks.sh OUT_DIR [MODEL]}
model=${2:-smollm2}
mkdir -p "$out"
log="$out/checks.log"
results="$out/results.jsonl"
: >"$log"
: >"$results"
device=${GPU_CHECKS_DEVICE:-cuda}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

if [[ $model == random:* ]]; then
  source_dir=${model#random:}
  model=$(mktemp -d)/smollm2-random
  python3 - "$source_dir" "$model" <<'EOF' >>"$log" 2>&1 || { echo "could not build the random model"; exit 1; }
import shutil, sys
from pathlib import Path
import torch
from transformers import AutoConfig, AutoModelForCausalLM
source, target = Path(sys.argv[1]), Path(sys.argv[2])
torch.manual_seed(0)
AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(source)).save_pretrained(target)
for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
    if (source / name).is_file():
        shutil.copy(source / name, target / name)
print(f"random weights of {source}'s config in {target}")
EOF
fi

step() { # step NAME SECONDS COMMAND...: run, log, keep JSON lines
  local name=$1 limit=$2 started=$SECONDS
  shift 2
  if [[ -n ${GPU_CHECKS_STEPS:-} && " $GPU_CHECKS_STEPS " != *" $name "* ]]; then
    return
  fi
  echo "=== $name: $*" >>"$log"
  timeout "$limit" "$@" >"$out/step.out" 2>&1
  local rc=$?
  cat "$out/step.out" >>"$log"
  python3 - "$name" "$out/step.out" >>"$results" <<'EOF'
import json, sys
name, text = sys.argv[1], open(sys.argv[2]).read()
start = text.find("{")
decoder = json.JSONDecoder()
while start != -1:  # every top-level JSON object in the output (one per line, or one indented)
    try:
        value, end = decoder.raw_decode(text, start)
    except ValueError:
        start = text.find("{", start + 1)
        continue
    if isinstance(value, dict):
        print(json.dumps({"step": name, **value}))
    start = text.find("{", end)
EOF
  rm -f "$out/step.out"
  echo "$name: exit $rc in $((SECONDS - started)) s" | tee -a "$log"
}

nvidia-smi -L >>"$log" 2>&1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
  | tee -a "$log"

if [[ $device == cuda ]]; then
  sizes=(--dtype bfloat16 --workloads rows64 rows16 conversations)
  graphs=(--cuda-graphs)
  step engine_bench_graphs 150 python3 benchmarks/hf_engine.py --model "$model" --device cuda "${sizes[@]}" \
    --decode graphs --sampling-noise generator counter
  if [[ ${GPU_CHECKS_PROFILE:-0} != 0 ]]; then
    step engine_profile 90 python3 benchmarks/hf_engine.py --model "$model" --device cuda --dtype bfloat16 \
      --workloads rows64 --decode graphs --sampling-noise generator counter --profile-loop "$GPU_CHECKS_PROFILE"
  fi
else
  sizes=(--workloads rows16 --rows-prompt-tokens 32 --rows-new-tokens 8)
  graphs=()
fi
step engine_bench 120 python3 benchmarks/hf_engine.py --model "$model" --device "$device" "${sizes[@]}" \
  --decode dynamic static
step pytest_gpu 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/agents/engines/test_hf_static_decode.py \
  tests/agents/engines/test_hf_counter_noise.py
smoke=(python3 scripts/gpu_smoke.py --device "$device" --model "$model" --lora 32 --value-head --episodes 16)
step smoke_separate_bf16 60 "${smoke[@]}"
step smoke_separate_graphs 60 "${smoke[@]}" "${graphs[@]}"
step smoke_colocated 60 "${smoke[@]}" --colocated
step smoke_colocated_graphs 60 "${smoke[@]}" --colocated "${graphs[@]}"
step smoke_tiny_full 45 python3 scripts/gpu_smoke.py --device "$device"
step smoke_separate_fp32 45 "${smoke[@]}" --engine-dtype float32

python3 - "$results" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "engines" in r or "workload" in r:
        print(json.dumps(r))
    else:
        keys = ("placement", "engine_dtype", "rollout_s", "generated_tokens_per_s", "logprob_mismatch_mean",
                "ratio_mean", "update_s", "weight_sync_s", "peak_cuda_mib", "errors")
        print(json.dumps({"step": r["step"], **{k: r[k] for k in keys if k in r}}))
EOF
