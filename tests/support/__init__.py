"""The test harness (not shipped in the wheel): references, the torch_npu emulation, model
workloads, launch counters and the golden recordings of generated text. Importable as
`tests.support` from the repository root (pytest's `pythonpath`, bench/common.py)."""
