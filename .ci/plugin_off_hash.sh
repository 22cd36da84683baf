#!/usr/bin/env bash
# The hash of what decides the outcome of the torch_npu checks that run torch_npu's own
# kernels with the plugin off (tests/ascend/test_npu_emulation.py, in the interpreter and
# on the device launch path): the emulation, its SoC / CANN-op / libdevice tables, the
# float64 reference and its tolerances, the cases, and the pinned releases (in
# setup_npu_venv.sh). .ci/run runs those checks only when this differs from the hash
# recorded in .ci/plugin_off.sha256; after running them (the commands are in .ci/run),
# record it with:  bash .ci/plugin_off_hash.sh > .ci/plugin_off.sha256
set -euo pipefail
cd "$(dirname "$0")/.."
cat tests/support/npu_emulation.py tests/support/npu_socs.py tests/support/npu_cann_ops.py \
  tests/support/npu_libdevice.py tests/support/reference.py tests/ascend/conftest.py \
  tests/ascend/npu_cases.py tests/ascend/test_npu_emulation.py tests/ascend/setup_npu_venv.sh \
  | sha256sum | cut -d' ' -f1
