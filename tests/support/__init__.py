"""The test harness (not shipped in the wheel): references, the torch_npu emulation, model
workloads, launch counters, the golden recordings of generated text and the helpers that
read the fused kernels' generated code. Importable as `tests.support` from the repository
root (pytest's `pythonpath`, bench/common.py)."""
