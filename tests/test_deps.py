"""The kernel-level dependency graph that keeps groups schedulable (scheduler/deps.py)."""

from types import SimpleNamespace

from inductor_ext.scheduler.deps import KernelGraph


def _schedule(kernels: dict[str, list[str]], edges: list[tuple[str, str]]):
    """Fake post-fusion nodes: kernel name -> ops; op `a` writes buffer `buf_a`, and an edge
    (a, b) makes b read it."""
    reads = {op: [] for ops in kernels.values() for op in ops}
    for producer, consumer in edges:
        reads[consumer].append(SimpleNamespace(name=f"buf_{producer}"))
    name_to_buf = {f"buf_{op}": SimpleNamespace(defining_op_name=lambda op=op: op)
                   for op in reads}
    sched = SimpleNamespace(name_to_buf=name_to_buf)

    def sub(op):
        return SimpleNamespace(get_name=lambda: op, unmet_dependencies=reads[op])

    return [SimpleNamespace(get_name=lambda k=k: k, scheduler=sched,
                            get_nodes=lambda ops=ops: [sub(op) for op in ops])
            for k, ops in kernels.items()]


def test_a_path_through_a_horizontally_fused_kernel_is_a_cycle():
    """a -> x and y -> b, with x and y in one kernel: a and b in one kernel would have to run
    both before and after it, though no op-level path joins a and b."""
    graph = KernelGraph(_schedule({"A": ["a"], "B": ["b"], "XY": ["x", "y"]},
                                  [("a", "x"), ("y", "b")]))
    assert graph.cycle_through({"a", "b"}) == "XY"
    assert graph.cycle_through({"a", "x", "y", "b"}) is None  # all four: nothing outside


def test_independent_kernels_merge_and_a_merge_is_remembered():
    graph = KernelGraph(_schedule({"A": ["a"], "B": ["b"], "C": ["c"], "D": ["d"]},
                                  [("a", "c"), ("d", "b")]))
    assert graph.cycle_through({"a", "b"}) is None
    graph.merge({"c", "d"}, "CD")  # now a -> CD -> b
    assert graph.cycle_through({"a", "b"}) == "CD"


def test_what_is_left_of_a_split_kernel_stays_one_kernel():
    """Taking c out of kernel CE (into a group with a) leaves e there: a -> e -> c closes a
    cycle through the rest of CE."""
    graph = KernelGraph(_schedule({"A": ["a"], "CE": ["c", "e"]}, [("a", "e"), ("e", "c")]))
    assert graph.cycle_through({"a", "c"}) == "CE"
    graph = KernelGraph(_schedule({"A": ["a"], "CE": ["c", "e"]}, [("a", "c"), ("c", "e")]))
    assert graph.cycle_through({"a", "c"}) is None  # e only after: fine
