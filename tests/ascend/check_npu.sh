#!/usr/bin/env bash
# The fused kernels through torch_npu's emulated default backend, checked four ways:
# fused on torch_npu's kernel class, gradients vs float64 in triton-ascend's interpreter,
# lowered by triton-ascend (make_ttir, ttir_to_linalg), UB planned by bishengir-compile
# (910B3 and Ascend950). See tests/ascend/check_npu.py. Builds the npu venv when needed
# (tests/ascend/setup_npu_venv.sh; $NPU_VENV, default <repo>/.npu-venv for torch_npu 2.13.0,
# <repo>/.npu-venv-<version> for the others).
#
#   bash tests/ascend/check_npu.sh [check_npu.py options]
#   TORCH_NPU_VERSION=2.14.0 bash tests/ascend/check_npu.sh --quick   # another paired release
#
# Last line: `npu: K fused through torch_npu, K numerics ok, K lowered, K ub-planned, F failed`;
# exits non-zero unless F = 0.
# A release other than 2.13.0 needs uv: setup_npu_venv.sh takes .venv/bin/uv or uv on PATH,
# else pip-installs one into <repo>/.uv-venv. Tiny transformers decoders with the plugin off
# and on (torch_npu's own failures told from ours): tests/ascend/check_npu_models.py, run
# in the same venv (.ci/run does on 2.11.0.post3).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
start=$(date +%s)
# TORCH_NPU_VERSION (default 2.13.0) and NPU_VENV pass through; setup_npu_venv.sh refuses an
# unpaired release before anything is built.
python="$(bash "$here/setup_npu_venv.sh" | tail -n1)"
export CHECK_NPU_SETUP_S=$(( $(date +%s) - start ))
cd "$root"
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" TRITON_INTERPRET=1 \
  TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 "$python" "$here/check_npu.py" "$@"
