#!/usr/bin/env bash
# Builds, one after another, the venvs of .ci/run's later stages, so that .ci/run can start
# this in the background while the README's test suite runs: building is network and disk,
# the suite is CPU. After each venv it creates <marker dir>/<name>.done; .ci/run waits for
# the marker of the venv a stage needs. Exits non-zero at the first venv that fails.
#
#   bash .ci/build_venvs.sh MARKER_DIR
#
# uv comes from .uv-venv (pip-installed here once). UV_CACHE_DIR is .ci/run's (inside the
# clone, on the venvs' filesystem, so uv links files instead of copying them: the torch
# builds cost the disk once, in the cache, which is kept).
set -euo pipefail
cd "$(dirname "$0")/.."
markers="$1"
mkdir -p "$markers"
export PIP_DISABLE_PIP_VERSION_CHECK=1
export UV_HTTP_TIMEOUT="${UV_HTTP_TIMEOUT:-180}"
t0=$SECONDS
done_() { echo "== venv $1 built at $(( (SECONDS - t0) / 60 ))m$(( (SECONDS - t0) % 60 ))s"; touch "$markers/$1.done"; }

[ -x .uv-venv/bin/uv ] || { python3 -m venv .uv-venv && .uv-venv/bin/pip install -q uv; }
uv=.uv-venv/bin/uv
done_ uv

# torch 2.15: the registry has only its CUDA build, which imports on CPU only with its
# nvidia-* wheels (3 GB to fetch; uv fetches them in parallel). The project's own
# (editable) install waits below.
"$uv" venv -q --allow-existing .venv215 --python python3
"$uv" pip install -q --python .venv215/bin/python torch==2.15.0 'triton~=3.9.0' \
  -r pyproject.toml --extra test

# The Ascend lowering check's venv (triton-ascend), as tests/ascend/check_lowering.sh makes it.
[ -x .ascend-venv/bin/python ] || python3 -m venv .ascend-venv
.ascend-venv/bin/pip install -q triton-ascend==3.2.0 pybind11 numpy
done_ ascend-lowering

# An editable install builds in the clone (setuptools writes its egg-info there): wait until
# the README command's own install in .venv is done (at most 20 minutes), then install the
# project into the other venvs one at a time.
for _ in $(seq 240); do
  .venv/bin/python -c "import inductor_ext" 2>/dev/null && break
  sleep 5
done
"$uv" pip install -q --python .venv215/bin/python --no-deps -e .
done_ torch-2.15

# The torch_npu emulation venvs (tests/ascend/setup_npu_venv.sh; idempotent, so the check
# scripts that call it again find them built).
for release in 2.14.0 2.13.0 2.12.0.post3 2.11.0.post3; do
  TORCH_NPU_VERSION=$release bash tests/ascend/setup_npu_venv.sh >/dev/null
  done_ "torch_npu-$release"
done
