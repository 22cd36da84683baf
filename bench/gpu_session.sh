#!/usr/bin/env bash
# The open issues' GPU measurements, in stages that each fit one 10-minute device call
# (bench/README.md, "A GPU session"). Results and logs go to $OUT (default ./gpu_out).
# Every bench checks its gradients against a reference before it times anything.
#
#   bash bench/gpu_session.sh models [M,M]  # 7 models (or those named), declines logged
#   bash bench/gpu_session.sh kernels    # the 16 bench cases (with Liger) + DiT blocks
#   bash bench/gpu_session.sh heldout    # cost model on shapes it was not fitted on
#   bash bench/gpu_session.sh diagnose   # Qwen3's and T5's kernels, profiled in turns
#   bash bench/gpu_session.sh host       # host time per backward call, no CUDA graphs
#   bash bench/gpu_session.sh sweep K/P  # part K of P of the full calibration sweep
#
# Liger: pip-installed if its wheel is in .whl/ (the GPU machine has no network).
set -euo pipefail
usage() {
  cat <<'EOF'
usage: bash bench/gpu_session.sh STAGE [ARG]   (PYTHON=.venv/bin/python, OUT=./gpu_out)
  models [M,M]   bench_models.py: 7 models (or those named), declines logged
  kernels        bench_norm_bwd.py (16 cases, with Liger) + bench_dit.py
  heldout        sweep_cost_model.py --grid heldout, strided, twins
  diagnose       profile_model.py: Qwen3's and T5's kernels, profiled in turns
  host           bench_host_cost.py: host time per backward call, no CUDA graphs
  sweep K/P      part K of P of the full calibration sweep (e.g. sweep 0/4)
Results and logs go to $OUT, created only once the stage and a CUDA device are checked.
EOF
}
# Everything is checked before $OUT is created: a wrong call leaves nothing behind.
fail() { echo "gpu_session.sh: $1" >&2; usage >&2; exit 2; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  "") fail "no stage given" ;;
  models|kernels|heldout|diagnose|host) ;;
  sweep) [[ ${2:-} =~ ^[0-9]+/[1-9][0-9]*$ ]] && (( 10#${2%/*} < 10#${2#*/} )) \
           || fail "sweep needs K/P with 0 <= K < P, e.g. 'sweep 0/4' (got '${2:-}')" ;;
  *) fail "unknown stage '$1'" ;;
esac
stage=$1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PYTHON:-python}
$PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else \
'gpu_session.sh: no CUDA device here; these stages measure on a GPU')"
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" > /dev/null; then
  $PY -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
log() { tee -a "$OUT/$1.log"; }
case $stage in
  models)
    # All 7 models take ~14 min on the H100 (mostly compiles): two calls, e.g.
    # `models llama,qwen3,gemma,gpt2` then `models bert,t5,dit`.
    only=${2:-}
    name=models_h100${only:+_${only//,/_}}
    TORCH_LOGS=+inductor_ext TORCHINDUCTOR_ENABLED_METRIC_TABLES=mix_order_fusion,mix_order_reject \
      $PY bench/bench_models.py --device cuda ${only:+--models "$only"} --csv "$OUT/$name.csv" \
      --plot "$OUT/$name.png" 2>&1 | log models
    cp metric_table_mix_order_*.csv "$OUT/" 2>/dev/null || true
    ;;
  kernels)
    # bench_norm_bwd exits 1 when a target is not met; the DiT blocks still run, and the
    # stage ends with the first failure's status.
    status=0
    $PY bench/bench_norm_bwd.py --csv "$OUT/norm_bwd_h100.csv" \
      --plot "$OUT/norm_bwd_h100.png" 2>&1 | log kernels || status=$?
    $PY bench/bench_dit.py --csv "$OUT/dit_h100.csv" 2>&1 | log kernels \
      || { rc=$?; [ "$status" -ne 0 ] || status=$rc; }
    exit "$status"
    ;;
  heldout)
    # twins: the strided grid coalesced, the pairs a per-op strided cost is fitted from
    # (fit_cost_model.py cost_sweep_h100.csv cost_sweep_strided_h100.csv cost_sweep_twins_h100.csv)
    # The strided grid with the hook's debug log: the config each fused kernel's autotuner
    # picked ("timed ..."), to tell LayerNorm's 1.65x at block_m 4 from a config choice.
    for grid in heldout strided twins; do
      logs=()  # TORCH_LOGS set empty makes `import torch` fail (torch 2.13)
      [ $grid = strided ] && logs=(TORCH_LOGS=+inductor_ext)
      env "${logs[@]}" $PY bench/sweep_cost_model.py --grid $grid --warm 8 \
        --csv "$OUT/cost_sweep_${grid}_h100.csv" 2>&1 | log heldout
    done
    ;;
  diagnose)
    # Per-kernel device time, the variants profiled in turns with an A/A control
    # (stock_again): Qwen3 (its q/k norms + RoPE backward, which stock leaves unfused) and
    # T5 (a 303 ms step, 55% in two atomic-add kernels that move between compiles).
    for model in qwen3 t5; do
      $PY bench/profile_model.py --model $model --variants stock,inductor_ext,stock_again \
        --top 30 --csv "$OUT/${model}_kernels_h100.csv" 2>&1 | log diagnose
    done
    ;;
  host)
    # 1000 back-to-back backward calls per variant, CPU clock; cProfile dumps of each
    $PY bench/bench_host_cost.py --profile "$OUT/host_profile" 2>&1 | log host
    ;;
  sweep)
    part=$2
    $PY bench/sweep_cost_model.py --part "$part" --warm 8 \
      --csv "$OUT/cost_sweep_h100_part${part%/*}.csv" 2>&1 | log sweep
    ;;
esac
