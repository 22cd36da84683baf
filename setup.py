"""A shim for tools that still run `python setup.py ...`: pyproject.toml is the source of
truth (metadata, version from inductor_ext.__version__, packages, package data, entry
point); this file adds nothing to it. Install with `pip install .` as the README does."""

from setuptools import setup

setup()
