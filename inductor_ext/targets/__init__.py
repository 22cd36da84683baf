"""The targets, one package each: its planning, code flavor, kernel glue and data, and the
registrations that plug them into planning, codegen and the scheduler (see CONTRIBUTING.md,
"Adding a target"). Importing this package registers every target."""

from . import ascend, cuda  # noqa: F401  (each registers itself)
