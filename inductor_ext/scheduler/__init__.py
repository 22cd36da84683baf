"""Scheduler side of the plugin: match, legality, convert, reorder, and the hook itself."""
