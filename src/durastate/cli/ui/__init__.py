"""``durastate ui``: a read-only inspector web page (the ``[ui]`` extra).

Starlette routes, Jinja2 templates and a vendored htmx (``static/``); no
build step. Every route is a GET that reads through the public facet API
(``presence.peek`` rather than ``read``, which sweeps); there is no endpoint
that writes, so any other method answers 405. Every list is paged by a
keyset cursor (``after``), never by OFFSET, so a page over a namespace with
1e5 rows costs the same as over one with ten (``bench/ui.py`` measures it).
Binds 127.0.0.1 by default: it has no authentication.
"""

from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
