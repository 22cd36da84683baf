#!/usr/bin/env bash
# Build the venv that runs the torch_npu emulation (inductor_ext/testing/npu_emulation.py):
#   torch 2.13.0 (CPU), triton-ascend 3.2.0 (it installs a package named `triton`, hence a
#   venv of its own), numpy < 2.4 (2.4 breaks triton-ascend's interpreter), pytest,
#   hypothesis, pybind11, transformers (optional: the tiny Llama test), ascendnpu-ir 1.2.0
#   (optional: bishengir-compile), this project (editable, no deps), and torch_npu 2.13.0's
#   wheel downloaded and unpacked, NOT installed (it needs CANN to import).
#
#   bash tests/ascend/setup_npu_venv.sh          # venv at $NPU_VENV, default <repo>/.npu-venv
#
# Idempotent: a stamp records the inputs of the last complete build; a venv whose stamp
# matches is left as it is. Prints the venv's python path as its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${NPU_VENV:-$root/.npu-venv}"
base_python="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

TORCH_VERSION=2.13.0
TORCH_NPU_VERSION=2.13.0
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

start=$(date +%s)
[ -x "$venv/bin/python" ] || "$base_python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q)

# torch first, from the same place the project's CI gets it; then triton-ascend over it:
# the CPU torch wheel does not depend on `triton`, so nothing reinstalls upstream Triton.
"${pip[@]}" "torch==$TORCH_VERSION"
"${pip[@]}" "triton-ascend==$TRITON_ASCEND_VERSION" "numpy<2.4" pytest pytest-xdist hypothesis pybind11
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
"$venv/bin/python" -m pip download -q --no-deps "torch_npu==$TORCH_NPU_VERSION" -d "$dl"
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
