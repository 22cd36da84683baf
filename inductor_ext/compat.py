"""Where the Inductor versions we support (torch 2.11 - 2.15) differ, and the Inductor names
the package uses.

The package imports Inductor internals through this module, with two exceptions:
targets/ascend/rms_norm_decomp.py imports Inductor's decomposition and lowering tables
inside the functions that edit them, and __main__.py reads Inductor's config to report it.
So a new torch release means reading this file and those two. A vendor's Inductor backend
differs by its own releases: those seams live in its target's folder (targets/ascend/
has its own). This module holds seams and the version shims behind
them, not features: what is built on them lives with its user (groups/unsplit.py records split
reductions through `after_split_reduction`, cache_hits.py logs FX-cache hits through
`after_fx_cache_hit`).
"""

from __future__ import annotations

import abc
import contextlib
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar, cast

import sympy
import torch
from torch._inductor import config as inductor_config
from torch._inductor import ir
from torch._inductor import metrics as inductor_metrics
from torch._inductor.codecache import PyCodeCache
from torch._inductor.codegen import triton as triton_codegen
from torch._inductor.codegen.common import ArgName
from torch._inductor.codegen.simd import (
    DisableReduction,
    EnableReduction,
    IterationRangesEntry,
    IterationRangesRoot,
)
from torch._inductor.codegen.simd_kernel_features import SIMDKernelFeatures
from torch._inductor.custom_graph_pass import get_hash_for_files
from torch._inductor.dependencies import index_vars_no_squeeze
from torch._inductor.loop_body import LoopBody
from torch._inductor.ops_handler import WrapperHandler
from torch._inductor.optimize_indexing import indexing_dtype_strength_reduction
from torch._inductor.runtime import triton_helpers
from torch._inductor.runtime.hints import DeviceProperties, HeuristicType
from torch._inductor.runtime.triton_heuristics import (
    CachingAutotuner,
    DebugAutotuner,
    FixedGrid,
    cached_autotune,
    config_from_dict,
)
from torch._inductor.scheduler import (
    BaseSchedulerNode,
    FusedSchedulerNode,
    Scheduler,
    SchedulerNode,
)
from torch._inductor.sizevars import SimplifyIndexing
from torch._inductor.utils import IndentedBuffer, Placeholder, _type_of, triton_type
from torch._inductor.virtualized import V
from torch.utils._sympy.functions import FloorDiv, ModularIndexing

if TYPE_CHECKING:
    from torch._inductor.codegen.common import SchedulingConstructor
    from torch._inductor.custom_graph_pass import CustomGraphPass
    from torch._inductor.dependencies import Dep
    from torch._inductor.sizevars import SizeVarAllocator

try:  # torch >= 2.12 keys the FX graph cache on a scheduler pass's uuid()
    from torch._inductor.custom_graph_pass import CustomSchedulerPass

    _SCHEDULER_PASS_IN_CACHE_KEY = True
except ImportError:  # torch 2.11: post-fusion passes are plain callables
    _SCHEDULER_PASS_IN_CACHE_KEY = False

    class CustomSchedulerPass(abc.ABC):  # type: ignore[no-redef]
        """Stand-in with the same interface as torch >= 2.12's CustomSchedulerPass."""

        @abc.abstractmethod
        def __call__(self, nodes: list[BaseSchedulerNode]) -> list[BaseSchedulerNode]: ...

        @abc.abstractmethod
        def uuid(self) -> Any: ...


#: torch 2.11 leaves `_post_fusion_custom_pass` out of the FX graph cache key, so a cached
#: graph would ignore our options (a compile with target "ascend" would reuse the "cuda"
#: kernels).
#: There a pre-fusion pass that changes nothing carries our uuid into the key instead.
CACHE_KEY_CARRIER_KEY = None if _SCHEDULER_PASS_IN_CACHE_KEY else "_pre_fusion_custom_pass"


def cache_key_carrier(source: CustomSchedulerPass) -> CustomGraphPass:
    """A no-op pre-fusion CustomGraphPass whose uuid() is `source.uuid()`."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class _CacheKeyCarrier(CustomGraphPass):
        def __call__(self, nodes: Any) -> Any:
            return nodes

        def uuid(self) -> Any:
            return source.uuid()

    return _CacheKeyCarrier()


try:  # torch >= 2.12
    from torch._inductor.optimize_indexing import convert_index_expr_to_value_expr
except ImportError:  # torch 2.11 has no such rewrite

    def convert_index_expr_to_value_expr(loop_body: LoopBody) -> None:
        return None

triton_compat: ModuleType | None
try:  # where Inductor's kernels take libdevice from (besides triton_helpers), if any
    from torch._inductor.runtime import triton_compat
except ImportError:  # pragma: no cover
    triton_compat = None

TORCH_VERSION = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
SUPPORTED_TORCH = ((2, 11), (2, 15))

TritonKernel = triton_codegen.TritonKernel
TritonScheduling = triton_codegen.TritonScheduling
FixedTritonConfig = triton_codegen.FixedTritonConfig

__all__ = [
    "ArgName",
    "BaseSchedulerNode",
    "CachingAutotuner",
    "CustomSchedulerPass",
    "DebugAutotuner",
    "DeviceProperties",
    "DisableReduction",
    "EnableReduction",
    "FixedGrid",
    "FixedTritonConfig",
    "FloorDiv",
    "FusedSchedulerNode",
    "HeuristicType",
    "IndentedBuffer",
    "IterationRangesEntry",
    "IterationRangesRoot",
    "LoopBody",
    "ModularIndexing",
    "Placeholder",
    "PyCodeCache",
    "SIMDKernelFeatures",
    "Scheduler",
    "SchedulerNode",
    "TritonKernel",
    "TritonScheduling",
    "V",
    "WrapperHandler",
    "cached_autotune",
    "config_from_dict",
    "get_hash_for_files",
    "index_vars_no_squeeze",
    "inductor_config",
    "inductor_metrics",
    "ir",
    "triton_compat",
    "triton_helpers",
    "triton_type",
]

# Inductor config key of upstream's own mix-order reduction; ours turns it off while on.
UPSTREAM_MIX_ORDER_KEY = "triton.mix_order_reduction"


def has_upstream_mix_order() -> bool:
    return hasattr(inductor_config.triton, "mix_order_reduction")


def upstream_mix_order_gates() -> str:
    """Which shape gates upstream's own mix-order reduction applies in this torch (the
    stock baseline our cost model compares with): "none" (no upstream mix-order),
    "strict" (2.10-2.14: also nrow >= 2 * ncol), "relaxed" (2.15: that ratio is gone)."""
    if not has_upstream_mix_order():
        return "none"
    return "relaxed" if TORCH_VERSION >= (2, 15) else "strict"


# mypy types a classmethod read off its class as a plain callable, without `__func__`.
_original_create_multilayer = ir.Reduction.create_multilayer.__func__  # type: ignore[attr-defined]


def after_split_reduction(after: Callable[..., None]) -> None:
    """Have Reduction.create_multilayer (Inductor's split of a long reduction into partial
    sums and their sum) call `after(out, device=, dst_dtype=, src_dtype=, inner_fn=,
    ranges=, reduction_ranges=, reduction_type=, reduction_hint=)` once it returns. A later
    call replaces the earlier `after` (the original is wrapped, never a wrapper)."""

    def create_multilayer(cls: type, device: torch.device, dst_dtype: torch.dtype,
                          src_dtype: torch.dtype, inner_fn: Callable[..., Any],
                          ranges: Sequence[sympy.Expr], reduction_ranges: Sequence[sympy.Expr],
                          reduction_type: str, split: int | sympy.Expr,
                          reduction_hint: ir.ReductionHint, input_node: ir.IRNode | None = None,
                          **kwargs: Any) -> ir.TensorBox:
        # torch 2.14 added a keyword-only `strict_sum`, renamed `strict_reduction` in 2.15
        # (config.numerics="strict": eager's reduction order). Pass any such keyword on.
        out = _original_create_multilayer(
            cls, device, dst_dtype, src_dtype, inner_fn, ranges, reduction_ranges,
            reduction_type, split, reduction_hint, input_node, **kwargs)
        after(out, device=device, dst_dtype=dst_dtype, src_dtype=src_dtype,
              inner_fn=inner_fn, ranges=ranges, reduction_ranges=reduction_ranges,
              reduction_type=reduction_type, reduction_hint=reduction_hint)
        return out

    # Patches Inductor's classmethod, which mypy will not have reassigned.
    ir.Reduction.create_multilayer = classmethod(create_multilayer)  # type: ignore[method-assign, assignment]


def after_fx_cache_hit(on_hit: Callable[[Mapping[str, int] | None], None]) -> bool:
    """Call `on_hit(counter_deltas)` after the FX graph cache replays a cached graph's
    counter changes (FxGraphCache.cache_hit_post_compile, torch 2.11-2.15). False where
    that seam does not exist. Wraps whatever is there: call it once."""
    from torch._inductor.codecache import FxGraphCache

    original = FxGraphCache.__dict__.get("cache_hit_post_compile")
    if not isinstance(original, staticmethod):
        return False
    replay = original.__func__

    def cache_hit_post_compile(graph: Any, *args: Any, **kwargs: Any) -> Any:
        out = replay(graph, *args, **kwargs)
        on_hit(getattr(graph, "counter_deltas", None))
        return out

    # Patches Inductor's staticmethod, which mypy will not have reassigned.
    FxGraphCache.cache_hit_post_compile = staticmethod(  # type: ignore[method-assign]
        cache_hit_post_compile)
    return True


def computed_buffer_for(record: Any, name: str) -> ir.ComputedBuffer:
    """A throw-away ComputedBuffer of the reduction `record` describes (an
    groups.unsplit.UnsplitReduction: a split reduction before the split), used only for its
    LoopBody."""
    data = ir.Reduction(
        device=record.device,
        dtype=record.dst_dtype,
        inner_fn=record.inner_fn,
        ranges=list(record.ranges),
        reduction_ranges=list(record.reduction_ranges),
        reduction_type=record.reduction_type,
        src_dtype=record.src_dtype,
        reduction_hint=record.reduction_hint,
    )
    layout = ir.FixedLayout(record.device, record.dst_dtype, list(record.ranges))
    return ir.ComputedBuffer(name=name, layout=layout, data=data)


def default_sizes_body(buf: ir.ComputedBuffer
                       ) -> tuple[tuple[list[sympy.Expr], list[sympy.Expr]], LoopBody]:
    """((iteration sizes, reduction sizes), LoopBody) of a reduction buffer."""
    sizes, body, _ = buf.get_default_sizes_body()
    return sizes, body


def reads_rows_contiguously(dep: Dep) -> bool:
    """Whether a row reduction's read walks memory with stride 1 along the reduced (last)
    axis; anything Inductor cannot tell counts as contiguous."""
    check = getattr(dep, "stride1_for_last_dim", None)
    return True if check is None else bool(check(result_for_complex_expression=True))


#: Reduction fields set on a "strict" reduction (config.numerics="strict", torch >= 2.14):
#: Inductor must keep eager's summation order (strict_sum_* in 2.14, strict_reduction_* in
#: 2.15). Absent before 2.14.
_STRICT_RBLOCK_FIELDS = ("strict_reduction_rblock", "strict_sum_rblock")


def is_strict_reduction(snode: BaseSchedulerNode) -> bool:
    """Whether this node is a reduction whose summation order Inductor promised to keep;
    the fused kernel would change it (upstream's mix-order declines these too)."""
    data = getattr(getattr(snode, "node", None), "data", None)
    return isinstance(data, ir.Reduction) and any(
        getattr(data, field, None) is not None for field in _STRICT_RBLOCK_FIELDS)


@contextlib.contextmanager
def kernel_local_users(node_names: frozenset[str]) -> Iterator[None]:
    """While Inductor's `Kernel.remove_kernel_local_buffers` runs, its scheduler's
    `can_buffer_be_removed_through_fusion(name, fused_node_names)` also counts
    `node_names` as nodes of the kernel (torch 2.11-2.15 share that signature)."""
    scheduler = getattr(V.graph, "scheduler", None)
    if scheduler is None or not node_names:
        yield
        return
    check = scheduler.can_buffer_be_removed_through_fusion
    scheduler.can_buffer_be_removed_through_fusion = (
        lambda name, names: check(name, type(names)([*names, *node_names])))
    try:
        yield
    finally:
        del scheduler.can_buffer_be_removed_through_fusion


def sizevars() -> SizeVarAllocator:
    """The graph's SizeVarAllocator while lowering; a fresh one outside a graph (index
    algebra on static sizes needs no shape environment)."""
    from torch._inductor.sizevars import SizeVarAllocator

    graph = V.graph
    return getattr(graph, "sizevars", None) or SizeVarAllocator()


def memory_indices(body: LoopBody, args: Sequence[Sequence[sympy.Expr]], buffer: str,
                   kind: str) -> list[sympy.Expr]:
    """The index expressions at which a LoopBody accesses `buffer` (`kind`: "load",
    "store" or "store_reduction"), its loop variables replaced by `args` (one list per
    range group, as the body is called)."""
    from torch._inductor.loop_body import MemoryUsageType

    usage = {"load": MemoryUsageType.LOAD, "store": MemoryUsageType.STORE,
             "store_reduction": MemoryUsageType.STORE_REDUCTION}[kind]
    exprs = body.indexing_from_args(args)
    return [exprs[entry.index_name] for entry in body.memory_usage[usage]
            if entry.buffer_name == buffer]


def computed_buffer_of(snode: BaseSchedulerNode) -> ir.ComputedBuffer:
    """The buffer a (non-template) scheduler node computes: Inductor types `node` as an
    `Operation | None`, though every node we fuse or absorb computes a buffer."""
    return cast(ir.ComputedBuffer, snode.node)


def device_of(snode: BaseSchedulerNode) -> torch.device:
    """The device of a scheduler node that computes something (Inductor's get_device()
    is None only for nodes without a buffer)."""
    device = snode.get_device()
    assert device is not None, f"{snode.get_name()} has no device"
    return device


def scheduler_nodes_of(node: BaseSchedulerNode) -> Sequence[SchedulerNode]:
    """`node.get_nodes()` of a node made of SchedulerNodes only (the row reductions
    matching admits: match.row_reduction_nodes checks)."""
    return cast("Sequence[SchedulerNode]", node.get_nodes())


def loop_body_of(snode: SchedulerNode
                 ) -> tuple[tuple[list[sympy.Expr], list[sympy.Expr]], LoopBody]:
    """((iteration sizes, reduction sizes), LoopBody) a scheduler node is generated from."""
    sizes = snode.get_ranges()
    return (list(sizes[0]), list(sizes[1])), snode._body


def reduction_type_of(snode: SchedulerNode) -> str | None:
    node = snode.node
    if isinstance(node, ir.ComputedBuffer) and isinstance(node.data, ir.Reduction):
        return node.data.reduction_type
    return None


def reduction_hint_name(snode: SchedulerNode) -> str:
    """Inductor's ReductionHint name of a reduction node ('' if none).

    A vendor's `Reduction.num_splits` may call every reduction that is not a full one
    DEFAULT (the Ascend target's does), which leaves the matcher no way to tell a row
    reduction over contiguous elements from a column reduction. For nodes grouped by a
    vendor's scheduling (NumelList groups)
    the hint is read back from the loads as upstream means it: INNER when some load is
    contiguous along the reduction, OUTER when along the iteration instead."""
    hint = getattr(getattr(getattr(snode, "node", None), "data", None), "reduction_hint", None)
    name = getattr(hint, "name", "")
    group = getattr(snode, "group", None)
    vendor_grouped = group is not None and bool(group) and len(group) == 2 and any(
        callable(getattr(v, "numels", None)) for v in group[1])
    if name != "DEFAULT" or not vendor_grouped:
        return name
    return _hint_from_strides(snode) or name


def _hint_from_strides(snode: SchedulerNode) -> str | None:
    from torch._inductor.loop_body import MemoryUsageType

    body = getattr(snode, "_body", None)
    if body is None or not body.reduce_vars or not body.iter_vars:
        return None
    inner = outer = False
    for entry in body.memory_usage[MemoryUsageType.LOAD]:
        index = body.indexing_exprs.get(entry.index_name)
        if index is None:
            continue
        inner |= _stride(index, body.reduce_vars[-1]) == 1
        outer |= _stride(index, body.iter_vars[-1]) == 1
    if inner != outer:
        return "INNER" if inner else "OUTER"
    return None


def _stride(index: sympy.Expr, var: sympy.Symbol) -> sympy.Expr | int:
    return sympy.expand(index).coeff(var, 1) if var in index.free_symbols else 0


def scheduler_of(nodes: Sequence[BaseSchedulerNode]) -> Scheduler | None:
    for node in nodes:
        sched = getattr(node, "scheduler", None)
        if sched is not None:
            return sched
    return None


def prepare_body_for_codegen(body: LoopBody) -> None:
    """The index rewrites Inductor applies to a LoopBody right before Triton codegen."""
    indexing_dtype_strength_reduction(body)
    convert_index_expr_to_value_expr(body)


def ranges_of(index_vars: Sequence[Sequence[sympy.Symbol]], sizes: Sequence[Sequence[sympy.Expr]]
              ) -> dict[sympy.Symbol, sympy.Expr]:
    return {v: s for vs, ss in zip(index_vars, sizes) for v, s in zip(vs, ss)}


def simplify_indexing(handler: Any, var_ranges: dict[sympy.Symbol, sympy.Expr]
                      ) -> SimplifyIndexing:
    return SimplifyIndexing(handler, var_ranges)


_Kernel = TypeVar("_Kernel")


def make_kernel(kernel_cls: Callable[..., _Kernel], tiling: dict[str, sympy.Expr],
                features: SIMDKernelFeatures, fixed_config: dict[str, int],
                persistent: bool = True) -> _Kernel:
    """Construct a TritonKernel subclass with a fixed launch config, its row reduction
    persistent (whole row in one tile) or looped over column tiles."""
    return kernel_cls(
        tiling,
        features=features,
        override_persistent_reduction=persistent,
        fixed_config=FixedTritonConfig(fixed_config),
    )


def triton_scheduling_of(backend: object) -> TritonScheduling | None:
    """The TritonScheduling behind a device backend. Combined schedulings (CUDA's, and
    a vendor's that also subclasses TritonScheduling itself) delegate Triton kernels to
    their `_triton_scheduling`, whose kernel class is the one the device really uses."""
    inner = getattr(backend, "_triton_scheduling", None)
    if isinstance(inner, TritonScheduling):
        return inner
    if isinstance(backend, TritonScheduling):
        return backend
    return None


def simd_numels(group: Any) -> tuple[int | sympy.Expr, int | sympy.Expr] | None:
    """(numel, rnumel) of a node's `group` from a SIMD (Triton) scheduling, else None.

    Inductor's Triton scheduling groups by numbers. A vendor's may group each side as a
    tuple subclass of sizes with a `numels()` product (NumelList); the C++ backend groups
    by plain tuples of sizes, which stay unrecognised."""
    if not group or len(group) != 2 or len(group[1]) != 2:
        return None
    out = []
    for value in group[1]:
        numels = getattr(value, "numels", None)
        if isinstance(value, tuple) and callable(numels):
            value = numels()
        if not isinstance(value, (int, sympy.Expr)):
            return None
        out.append(value)
    return out[0], out[1]


def scheduling_class_for(device_type: str) -> SchedulingConstructor | None:
    """The scheduling class registered for a device type (None if none is)."""
    from torch._inductor.codegen.common import get_scheduling_for_device

    return get_scheduling_for_device(device_type)


def kernel_path(src_code: str, kernel_name: str) -> str:
    """Where Inductor writes a kernel's source (the '# kernel path:' of the wrapper)."""
    from torch._inductor.codecache import code_hash, get_path
    from torch._inductor.utils import Placeholder

    subs = kernel_name if inductor_config.triton.unique_kernel_names else "triton_"
    final = src_code.replace(str(Placeholder.DESCRIPTIVE_NAME), kernel_name)
    final = final.replace(str(Placeholder.KERNEL_NAME), subs).replace("#pragma CMT", "#")
    return get_path(code_hash(final.strip()), "py")[2]


def device_properties(device: torch.device) -> DeviceProperties:
    return DeviceProperties.create(device)


def deterministic_mode() -> bool:
    """Inductor's deterministic mode or torch's deterministic algorithms: no on-device
    config choice, since configs differ in summation order."""
    return bool(getattr(inductor_config, "deterministic", False)
                or torch.are_deterministic_algorithms_enabled())


def compile_config(autotuner: CachingAutotuner, config: Any) -> Any:
    """Compile one launch config of a kernel's autotuner, as its precompile does for each
    (`_precompile_config` in Inductor 2.11-2.15 and in the vendors' autotuners that subclass
    Inductor's)."""
    compile_one = getattr(autotuner, "_precompile_config", None)
    if compile_one is None:
        raise NotImplementedError(f"{type(autotuner).__name__} has no _precompile_config: "
                                  "this Inductor compiles configs some other way")
    return compile_one(config)


def autotuner_classes(caching: type, debug: type) -> dict[str, type]:
    """cached_autotune's keywords for our autotuner subclasses, where it takes them (2.11
    on); an older signature gets Inductor's own classes (every config is timed)."""
    params = inspect.signature(cached_autotune).parameters
    if "caching_autotuner_cls" in params and "debug_autotuner_cls" in params:
        return {"caching_autotuner_cls": caching, "debug_autotuner_cls": debug}
    return {}


def triton_pointer_type(dtype: torch.dtype) -> str:
    """Triton signature type of a pointer to `dtype`, as Inductor writes it ("*bf16")."""
    return _type_of(dtype)
