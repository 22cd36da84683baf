"""What the tests of the fused kernels share: an RMSNorm backward's inputs on the CPU
interpreter, reading Inductor's generated wrapper code (its Triton kernel count, the fused
kernel's source), register tiles on CPU, and the devices and norm shapes that planning tests
plan for (an H100-like Hopper, an A100-like Ampere, the interpreter's two cores)."""

import torch

import inductor_ext
from inductor_ext.plan import DeviceInfo, ShapeInfo


def rms_inputs(M=64, N=40):
    """x, w, dy and rstd of `tests.support.reference.rms_backward`: [M, N], [N], [M, N], [M, 1]."""
    return torch.randn(M, N), torch.randn(N), torch.randn(M, N), torch.rand(M, 1) + 0.5


def triton_kernel_count(code: str) -> int:
    """The Triton kernels a generated wrapper defines."""
    return code.count("async_compile.triton(")


def register_tiled(cuda_knobs, tile=16):
    """Register tiles of `tile` columns: rows longer than that are unrolled into tiles (the
    returned config patch, to enter around the compile, lowers `max_persistent_n`)."""
    cuda_knobs(register_tile=tile)
    return inductor_ext.config.patch(max_persistent_n=tile)


def fused_kernel_source(code: str) -> str:
    """The fused kernel's Triton source (the first kernel with a row loop)."""
    return next(src for src in code.split("async_compile.triton(")[1:]
                if "for xoffset in" in src)


HOPPER = DeviceInfo(type="cuda", name="H100-like", cores=132, l2_bytes=50 * 2**20,
                    dram_bytes_per_s=3.35e12, capability=(9, 0))
AMPERE = DeviceInfo(type="cuda", name="A100-like", cores=108, capability=(8, 0))
INTERPRETER = DeviceInfo(type="cpu", cores=2, interpreted=True)


def norm_shape(M: int, N: int, partials: int) -> ShapeInfo:
    """A bf16 norm backward of M rows of N columns with `partials` column sums, as the
    planner sees it (x and dy read, dx written)."""
    nbytes = 3 * M * N * 2
    return ShapeInfo(M_hint=M, M_static=True, N=N, num_columns=partials, elem_bytes=2,
                     shared_bytes=2 * M * N * 2, total_bytes=nbytes, unfused_bytes=2 * nbytes,
                     row_elem_bytes=6, device=torch.device("cuda:9"))
