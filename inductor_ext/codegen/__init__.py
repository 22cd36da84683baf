"""Codegen: the fused kernel (built on the scheduling a target registered), its final step,
and the code rewrites; each target's flavor is registered from its package."""
