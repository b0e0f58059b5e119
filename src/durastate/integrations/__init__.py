"""Integrations of durastate with other frameworks, one module per framework, each behind its own extra."""
