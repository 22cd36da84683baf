"""What a user sees of the plugin's decisions (issue 41): the one INFO line per graph, cold
and from a warm FX-graph cache, its grouped module names, and the short plan in DEBUG."""

from inductor_ext.plan.types import FinalizeBlock, LaunchPlan


def test_plan_summary_is_short_and_names_the_essentials():
    plan = LaunchPlan(target="cuda", programs=132, block_m=4, r0_block=4096, num_warps=8,
                      num_stages=1, row_loop="strided", final_step=FinalizeBlock(16, 8, 4),
                      configs=((("XBLOCK", 4),), (("XBLOCK", 2),)))
    assert plan.summary(8192) == ("cuda: programs=132 block_m=4 split=64 row=4096 configs=2 "
                                  "final=16cols")
    tiled = LaunchPlan(target="cuda", programs=66, block_m=2, r0_block=1024, num_warps=8,
                       num_stages=1, row_loop="strided", column_tiled=True, register_tiles=8,
                       column_groups=2)
    text = tiled.summary()
    assert text == ("cuda: programs=66x2 block_m=2 column tiles=8x1024 in registers "
                    "configs=1 final=aten")
    assert len(repr(tiled)) > 5 * len(text)
