"""Code the generated kernels import at run time (in compile workers too)."""
