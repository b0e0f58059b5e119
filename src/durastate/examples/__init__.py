"""Runnable examples: ``python -m durastate.examples.NAME``."""
