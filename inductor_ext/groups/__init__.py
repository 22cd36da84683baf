"""The shared floor: what the scheduler builds and codegen reads (the fused node, its column
reductions and their loop bodies, the combine table, the user's modules they came from)."""
