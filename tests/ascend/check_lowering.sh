#!/usr/bin/env bash
# Compile check of the Ascend flavor with triton-ascend's real front end.
#  1. In the project's environment: generate every kernel the Ascend flavor emits for the
#     lowering cases (CPU, Triton interpreter) and dump them as JSON.
#  2. In a separate venv with triton-ascend 3.2.0 (it replaces the `triton` package), lower
#     each through make_ttir and ttir_to_linalg (bundled triton-adapter-opt).
# Prints one line per kernel and ends with `N passed, N failed`; exits non-zero on a failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${ASCEND_VENV:-$root/.ascend-venv}"
python="${PYTHON:-}"
if [ -z "$python" ]; then
  if [ -x "$root/.venv/bin/python" ]; then python="$root/.venv/bin/python"; else python=python3; fi
fi

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import triton, sys; sys.exit(triton.__version__ != '3.2.0')" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check triton-ascend==3.2.0 pybind11 numpy
fi

dump="$(mktemp -d)"
trap 'rm -rf "$dump"' EXIT
(cd "$root" && TRITON_INTERPRET=1 "$python" "$here/dump_kernels.py" "$dump")
"$venv/bin/python" "$here/lower_kernels.py" "$dump"
