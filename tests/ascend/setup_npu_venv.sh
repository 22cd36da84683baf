#!/usr/bin/env bash
# Build the venv that runs the torch_npu emulation (tests/support/npu_emulation.py):
#   torch 2.13.0 (CPU), triton-ascend 3.2.0 (it installs a package named `triton`, hence a
#   venv of its own), numpy < 2.4 (2.4 breaks triton-ascend's interpreter), pytest,
#   hypothesis, pybind11, transformers (optional: the tiny Llama test), ascendnpu-ir 1.2.0
#   (optional: bishengir-compile), this project (editable, no deps), and torch_npu 2.13.0's
#   wheel downloaded and unpacked, NOT installed (it needs CANN to import).
#
#   bash tests/ascend/setup_npu_venv.sh          # venv at $NPU_VENV, default <repo>/.npu-venv
#   TORCH_NPU_VERSION=2.14.0 bash tests/ascend/setup_npu_venv.sh   # <repo>/.npu-venv-2.14.0
#
# TORCH_NPU_VERSION (default 2.13.0) picks the torch_npu release; torch is its pair (same
# minor). 2.13.0 is built as CI has always built it (pip, torch's CPU wheel). The other
# pairs' torch exists on the registry only as a CUDA build, which imports only with its
# nvidia-* wheels: those venvs are built with uv (as .ci/run builds torch 2.15's), and the
# upstream `triton` torch depends on is removed before triton-ascend is installed, so that
# `import triton` is triton-ascend. uv is .venv/bin/uv, else uv on PATH, else the one in
# $UV_VENV (default <repo>/.uv-venv, gitignored), pip-installed there on first need. A
# torch_npu wheel already downloaded can be named by TORCH_NPU_WHEEL (a file) or found in
# TORCH_NPU_WHEEL_DIR; else pip downloads it.
#
# Idempotent: a stamp records the inputs of the last complete build; a venv whose stamp
# matches is left as it is. Prints the venv's python path as its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
base_python="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

TORCH_NPU_VERSION="${TORCH_NPU_VERSION:-2.13.0}"
# The releases we pair: torch_npu X.Y.Z[.postN] requires torch X.Y.Z.
case "$TORCH_NPU_VERSION" in
  2.11.0.post3) TORCH_VERSION=2.11.0 ;;
  2.12.0.post3) TORCH_VERSION=2.12.0 ;;
  2.13.0) TORCH_VERSION=2.13.0 ;;
  2.14.0) TORCH_VERSION=2.14.0 ;;
  *) echo "setup_npu_venv: TORCH_NPU_VERSION=$TORCH_NPU_VERSION is not a paired release" \
       "(2.11.0.post3, 2.12.0.post3, 2.13.0, 2.14.0)" >&2; exit 2 ;;
esac
if [ "$TORCH_NPU_VERSION" = 2.13.0 ]; then default_venv="$root/.npu-venv"
else default_venv="$root/.npu-venv-$TORCH_NPU_VERSION"; fi
venv="${NPU_VENV:-$default_venv}"
TRITON_ASCEND_VERSION=3.2.0
ASCENDNPU_IR_VERSION=1.2.0
# Unpacked wheel: $wheel_dir/torch_npu/_inductor/... and $wheel_dir/torchnpugen (pure Python,
# read by torch_npu's lowering for its fallback op list).
wheel_dir="$venv/torch_npu_wheel"
stamp="$venv/.npu-emulation-stamp"
want="torch=$TORCH_VERSION torch_npu=$TORCH_NPU_VERSION triton-ascend=$TRITON_ASCEND_VERSION"
want="$want ascendnpu-ir=$ASCENDNPU_IR_VERSION layout=3 root=$root"

if [ -f "$stamp" ] && [ "$(head -n1 "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ] \
    && [ -f "$wheel_dir/torch_npu/_inductor/__init__.py" ] \
    && [ -f "$wheel_dir/torchnpugen/__init__.py" ]; then
  echo "npu venv up to date: $venv" >&2
  echo "$venv/bin/python"
  exit 0
fi

# uv, for the CUDA-build pairs: the project venv's (.ci/run installs it there), else one on
# PATH, else this script's own, pip-installed once into $uv_venv (gitignored) from the same
# registry as everything else, so that a fresh clone with only README's quick start done
# builds every pair.
uv_venv="${UV_VENV:-$root/.uv-venv}"
find_uv() {
  local cand
  for cand in "$root/.venv/bin/uv" "$(command -v uv || true)" "$uv_venv/bin/uv"; do
    if [ -n "$cand" ] && [ -x "$cand" ]; then echo "$cand"; return 0; fi
  done
  return 1
}
install_uv() {
  echo "setup_npu_venv: no uv in .venv/bin or on PATH: installing it into $uv_venv" >&2
  { [ -x "$uv_venv/bin/python" ] || "$base_python" -m venv "$uv_venv"; } >&2 || return 1
  "$uv_venv/bin/python" -m pip install -q uv >&2 || return 1
  [ -x "$uv_venv/bin/uv" ] || return 1
  echo "$uv_venv/bin/uv"
}

start=$(date +%s)
if [ "$TORCH_VERSION" = 2.13.0 ]; then
  [ -x "$venv/bin/python" ] || "$base_python" -m venv "$venv"
  pip=("$venv/bin/python" -m pip install -q)
  # torch first, from the same place the project's CI gets it; then triton-ascend over it:
  # the CPU torch wheel does not depend on `triton`, so nothing reinstalls upstream Triton.
  "${pip[@]}" "torch==$TORCH_VERSION"
  "${pip[@]}" "triton-ascend==$TRITON_ASCEND_VERSION" "numpy<2.4" pytest pytest-xdist \
    hypothesis pybind11
else
  # The CUDA build (torch + nvidia-* + upstream triton, ~3 GB to fetch) with uv, which
  # fetches in parallel; --seed puts pip in the venv for the steps below.
  uv="$(find_uv)" || uv="$(install_uv)" || {
    echo "setup_npu_venv: torch $TORCH_VERSION needs uv: none in .venv/bin, $uv_venv/bin" \
      "or on PATH, and pip could not install it into $uv_venv" >&2
    exit 1; }
  [ -x "$venv/bin/python" ] || "$uv" venv -q --seed "$venv" --python "$base_python"
  pip=("$uv" pip install -q --python "$venv/bin/python")
  export UV_HTTP_TIMEOUT="${UV_HTTP_TIMEOUT:-180}"
  "${pip[@]}" "torch==$TORCH_VERSION" "numpy<2.4" pytest pytest-xdist hypothesis pybind11
  # torch's dependency, upstream Triton, owns the same `triton` package as triton-ascend:
  # remove it first so that no file of it is left among triton-ascend's.
  "$uv" pip uninstall -q --python "$venv/bin/python" triton
  "${pip[@]}" "triton-ascend==$TRITON_ASCEND_VERSION"
fi
if "$venv/bin/python" -c "import triton, sys; sys.exit(triton.__version__ != '$TRITON_ASCEND_VERSION')"
then :; else
  echo "setup_npu_venv: 'triton' in $venv is not triton-ascend $TRITON_ASCEND_VERSION" >&2
  exit 1
fi
"${pip[@]}" --no-deps -e "$root"

# Optional extras: report, never fail the build on them.
optional=""
if "${pip[@]}" transformers >/dev/null 2>&1; then optional="$optional transformers"; else
  echo "setup_npu_venv: transformers did not install (tiny-Llama test will skip)" >&2; fi
if "${pip[@]}" "ascendnpu-ir==$ASCENDNPU_IR_VERSION" >/dev/null 2>&1; then
  optional="$optional ascendnpu-ir"; else
  echo "setup_npu_venv: ascendnpu-ir $ASCENDNPU_IR_VERSION did not install" >&2; fi
# Installing a package may have pulled numpy >= 2.4 back in.
"${pip[@]}" "numpy<2.4"

# torch_npu: the wheel's files only (importing it needs CANN; the emulation loads its
# _inductor package by path).
dl="$(mktemp -d)"
trap 'rm -rf "$dl"' EXIT
if [ -n "${TORCH_NPU_WHEEL:-}" ]; then cp "$TORCH_NPU_WHEEL" "$dl/"
elif [ -n "${TORCH_NPU_WHEEL_DIR:-}" ] \
    && ls "$TORCH_NPU_WHEEL_DIR"/torch_npu-"$TORCH_NPU_VERSION"-*.whl >/dev/null 2>&1; then
  cp "$TORCH_NPU_WHEEL_DIR"/torch_npu-"$TORCH_NPU_VERSION"-*.whl "$dl/"
else
  "$venv/bin/python" -m pip download -q --no-deps "torch_npu==$TORCH_NPU_VERSION" -d "$dl"
fi
rm -rf "$wheel_dir"
mkdir -p "$wheel_dir"
"$venv/bin/python" - "$dl" "$wheel_dir" <<'EOF'
import glob, sys, zipfile
wheels = glob.glob(sys.argv[1] + "/torch_npu-*.whl")
assert len(wheels) == 1, wheels
with zipfile.ZipFile(wheels[0]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist()
                               if n.startswith(("torch_npu/", "torchnpugen/"))])
EOF

{ echo "$want"; echo "optional:$optional"; echo "built in $(( $(date +%s) - start )) s"; } \
  > "$stamp"
echo "npu venv built in $(( $(date +%s) - start )) s:$optional" >&2
echo "$venv/bin/python"
