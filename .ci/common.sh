# Sourced by .ci/run and .ci/full: the stage clock, and the venvs of the later stages built
# in the background (.ci/build_venvs.sh) while the first suite runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
started=$SECONDS
stage() { echo "== CI $(( (SECONDS - started) / 60 ))m$(( (SECONDS - started) % 60 ))s: $*"; }

# The venvs and uv's cache take ~22 GB (uv links the venvs' files to its cache); say what
# the disk has, so that a full disk reads as one.
df -h . | tail -n1 | awk '{print "disk free at start: " $4 " of " $2}'

# uv's cache inside the clone: on the venvs' filesystem (links, not copies) and kept.
export UV_CACHE_DIR="$PWD/.uv-cache"
markers="$PWD/.ci-venvs"
rm -rf "$markers"
# Niced: the suite beside it is CPU-bound, the builder mostly waits on disk and network.
nice -n 10 bash .ci/build_venvs.sh "$markers" > .ci-venvs.log 2>&1 &
builder=$!
# Waits for the venv `$1` of .ci/build_venvs.sh; ends the run with its log if it failed.
venv_ready() {
  while [ ! -e "$markers/$1.done" ]; do
    if ! kill -0 "$builder" 2>/dev/null; then
      wait "$builder" || true
      if [ ! -e "$markers/$1.done" ]; then
        echo "CI: building the venv '$1' failed; .ci-venvs.log ends:" >&2
        tail -n 40 .ci-venvs.log >&2; exit 1
      fi
    fi
    sleep 5
  done
  grep "^== venv $1 " .ci-venvs.log || true
}

# Runs each argument (a command line, which may call the functions here) at once, in a
# subshell of its own: for single-threaded checks, two to a 2-core machine. Each one's
# output is printed after, in order, under its command line; fails when any failed. Join
# the steps of one argument with && (errexit does not reach into a tested context).
side_by_side() {
  local logs pids=() i status=0
  logs=$(mktemp -d)
  i=0
  for cmd in "$@"; do
    ( eval "$cmd" ) > "$logs/$i.log" 2>&1 &
    pids+=($!)
    i=$((i + 1))
  done
  i=0
  for cmd in "$@"; do
    if wait "${pids[$i]}"; then echo "-- $cmd: ok"; else echo "-- $cmd: FAILED"; status=1; fi
    cat "$logs/$i.log"
    i=$((i + 1))
  done
  rm -rf "$logs"
  return "$status"
}

# Style, the import layers of pyproject.toml, the type check.
static_checks() {
  .venv/bin/ruff check inductor_ext tests bench inductor_ext_autoload && .venv/bin/lint-imports \
    && .venv/bin/mypy
}

# torch_npu's own kernels with the plugin off (test_npu_emulation.py: in the interpreter, and
# on the device launch path, where every config is compiled, timed on the virtual clock and
# picked: the N=128 cases) depend on the emulation and the pinned releases only.
plugin_off_unchanged() {
  [ "$(bash .ci/plugin_off_hash.sh)" = "$(cat .ci/plugin_off.sha256 2>/dev/null)" ]
}
plugin_off_checks() {  # $1: the venv's python
  TRITON_INTERPRET=1 "$1" -m pytest -q -n auto tests/ascend/test_npu_emulation.py
  stage "torch_npu's own kernels on the device launch path"
  INDUCTOR_EXT_EMULATE_DEVICE_PATH=all TRITON_INTERPRET=1 "$1" -m pytest -q \
    tests/ascend/test_npu_emulation.py -k "128]"
}
