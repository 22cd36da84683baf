from setuptools import find_packages, setup

setup(
    name="inductor_ext",
    version="0.1.0",
    description="Mix-order reduction for PyTorch Inductor: fused norm backward (CUDA, Ascend)",
    packages=find_packages(include=["inductor_ext", "inductor_ext.*"]),
    py_modules=["inductor_ext_autoload"],
    python_requires=">=3.10",
    install_requires=["torch>=2.11,<2.15"],
    extras_require={
        "test": ["pytest", "hypothesis", "numpy", "matplotlib", "transformers"],
        "plot": ["matplotlib"],
    },
    entry_points={"torch.backends": ["inductor_ext = inductor_ext_autoload:load"]},
)
