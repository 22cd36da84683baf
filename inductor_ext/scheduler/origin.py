"""Where a reduction comes from, in the user's terms: module name, source line, and whether
it is a norm's gradient.

Inductor IR nodes keep the FX nodes they were lowered from (``origins``). Backward FX nodes
carry the forward module stack as ``fwd_nn_module_stack`` (forward ones as
``nn_module_stack``) and the user's ``stack_trace``; ops from a decomposed norm keep
``original_aten``. A reduction counts as a norm's (kind ``"norm"``) when it is a gradient
(backward metadata) of a module whose class name contains "Norm", or of an ATen norm
backward op. Anything else that rides along (a Linear's bias grad, a recomputed forward
statistic) is ``"other"``. When Dynamo compiled the norm's own ``forward`` as a frame (after
a graph break), the nodes carry no module stack; the class is then read from the source
(the class around the stack trace's innermost line).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch

from ..groups.attribution import Attribution

if TYPE_CHECKING:
    from ..compat import BaseSchedulerNode

#: ATen reductions whose FX nodes name a reduction (in `origins`, which also holds the
#: pointwise ops inlined into the same buffer).
REDUCTION_OPS = frozenset({"sum", "mean", "amax", "amin", "prod", "var_mean", "var", "std",
                           "logsumexp"})

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_SUBSCRIPT = re.compile(r"\[['\"]?([^'\"\]]+)['\"]?\]")


@dataclasses.dataclass(frozen=True)
class Origin:
    """What one reduction is, for tables and logs."""

    module: str  # dotted module path relative to the compiled frame ('' if none)
    source: str  # "file.py:123" of the forward code ('' if unknown)
    norm: bool
    #: The module's class ("LayerNorm", "Qwen3RMSNorm"; '' if unknown): it says what a
    #: name of digits alone ("3.2", a child of a top-level nn.Sequential) is.
    cls: str = ""

    @property
    def kind(self) -> str:
        return "norm" if self.norm else "other"

    @property
    def key(self) -> str:
        """Names one norm in a graph: its module, else its source line."""
        return self.module or self.source or "?"


UNKNOWN = Origin(module="", source="", norm=False)


def of_node(snode: BaseSchedulerNode) -> Origin:
    """The origin of a scheduler node's reduction (UNKNOWN when there is no metadata)."""
    try:
        return of_fx(_main_fx_node(snode))
    except Exception:  # metadata is best effort; it never decides a fusion
        return UNKNOWN


def of_fx(fx_node: torch.fx.Node | None) -> Origin:
    if fx_node is None:
        return UNKNOWN
    meta = getattr(fx_node, "meta", {}) or {}
    backward = "fwd_nn_module_stack" in meta
    stack = meta.get("fwd_nn_module_stack") or meta.get("nn_module_stack") or {}
    module, type_name = "", ""
    if stack:
        path, cls = list(stack.values())[-1]
        module = clean_module_path(str(path))
        type_name = cls.__name__ if isinstance(cls, type) else str(cls).rsplit(".", 1)[-1]
        module = module or type_name
    aten = str(meta.get("original_aten") or "")
    if not type_name:
        type_name = _enclosing_class(*_innermost_frame(meta.get("stack_trace")))
    norm_module = backward and "norm" in type_name.lower()
    norm_op = "norm_backward" in aten and ("layer_norm" in aten or "rms_norm" in aten)
    return Origin(module=module, source=_source(meta.get("stack_trace")),
                  norm=norm_module or norm_op, cls=type_name)


def _main_fx_node(snode: BaseSchedulerNode) -> torch.fx.Node | None:
    """The FX node a reduction buffer was made for: Inductor's origin node, else the first
    (by name) reduction among its origins, else any origin with a module stack."""
    node = snode.node
    getter = getattr(node, "get_origin_node", None)
    main = getter() if getter is not None else None
    if main is not None:
        return main
    origins = sorted(getattr(node, "origins", ()) or (), key=lambda n: n.name)
    for fx in origins:
        if is_reduction_op(fx):
            return fx
    for fx in origins:
        meta = getattr(fx, "meta", {}) or {}
        if meta.get("fwd_nn_module_stack") or meta.get("nn_module_stack"):
            return fx
    return origins[0] if origins else None


def is_reduction_op(fx_node: torch.fx.Node) -> bool:
    target = getattr(fx_node, "target", None)
    packet = getattr(target, "overloadpacket", None)
    return getattr(packet, "__name__", "") in REDUCTION_OPS


def clean_module_path(path: str) -> str:
    """"L['self'].model.layers.0.norm" or "L['self']._modules['model']" -> "model.layers.0.norm"
    (the compiled frame's own name is dropped). A frame that is a `*args` wrapper around
    the module's forward (transformers 5.24 wraps its models' forward so) names the module
    "L['args'][0]": that position is dropped too."""
    path = re.sub(r"^L\[['\"]args['\"]\]\[\d+\]\.?", "", path)
    path = re.sub(r"^L\[['\"][^'\"]*['\"]\]\.?", "", path)
    path = path.replace("._modules", "").replace("_modules", "")
    path = _SUBSCRIPT.sub(r".\1", path)
    return re.sub(r"\.+", ".", path).strip(".")


def _innermost_frame(stack_trace: str | None) -> tuple[str, int]:
    """(file, line) of the innermost frame of a stack trace (('', 0) if none)."""
    frames = _FRAME.findall(str(stack_trace or ""))
    return (frames[-1][0], int(frames[-1][1])) if frames else ("", 0)


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _source(stack_trace: str | None) -> str:
    """The innermost frame of a stack trace outside torch itself (the user's call of an
    `nn.RMSNorm`, not its forward) as "file.py:123"; the innermost one if all are."""
    frames = _FRAME.findall(str(stack_trace or ""))
    if not frames:
        return ""
    outside = [f for f in frames if not os.path.abspath(f[0]).startswith(_TORCH_DIR)]
    path, line = (outside or frames)[-1]
    return f"{os.path.basename(path)}:{line}".replace(" ", "_")


def _enclosing_class(path: str, line: int) -> str:
    """Name of the innermost class whose body holds `line` of `path` ('' if none)."""
    best = ""
    for name, start, end in _classes(path):
        if start <= line <= end:
            best = name  # ast.walk visits outer classes first
    return best


@functools.lru_cache(maxsize=64)
def _classes(path: str) -> tuple[tuple[str, int, int], ...]:
    if not path or not os.path.isfile(path):
        return ()
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple((n.name, n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
                 if isinstance(n, ast.ClassDef))


def attribute(rows: Iterable[Origin], columns: Iterable[Origin]) -> Attribution:
    """Attribution of a group: its row-side reductions and its column reductions."""
    rows, columns = list(rows), list(columns)
    everything = [*columns, *rows]
    return Attribution(
        norms=_unique(o.key for o in everything if o.norm),
        modules=_unique(o.module for o in everything if o.module),
        sources=_unique(o.source for o in everything if o.source),
        norm_columns=sum(o.norm for o in columns),
        other_columns=sum(not o.norm for o in columns),
        classes=classes(everything))


def classes(origins: Iterable[Origin]) -> dict[str, str]:
    """The class of each module and norm key among `origins` (the first origin's, where
    two disagree)."""
    out: dict[str, str] = {}
    for o in origins:
        if o.cls:
            for name in {o.module, o.key} - {"", "?"}:
                out.setdefault(name, o.cls)
    return out


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
