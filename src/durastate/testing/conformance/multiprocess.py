"""Conformance: multiprocess (filled in by its owner)."""

__all__: list[str] = []
