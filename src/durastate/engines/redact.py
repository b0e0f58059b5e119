"""Passwords out of store URLs, wherever a URL is shown (``store.url``, ``repr``, errors).

Driver-free, so the registry can redact the URL in the message that says a
driver is missing. Every form libpq accepts is covered:

* ``postgresql://user:secret@host/db``      (URL userinfo)
* ``postgresql://host/db?password=secret``  (URL query parameter)
* ``host=h password=secret`` / ``password='a b'`` (keyword conninfo)

Redacting keeps the rest of the URL as given, so a message still names the
host, database and options the caller wrote.
"""

from __future__ import annotations

import re

__all__ = ["redact_url"]

HIDDEN = "***"
_NETLOC = re.compile(r"[^/?#]*")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*")
# A keyword value is a single-quoted string (backslash escapes) or a run of non-blanks.
_KEYWORD_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s']*)")


def redact_url(url: str) -> str:
    """``url`` with every password replaced (userinfo: dropped; parameters: ``***``)."""
    if "://" not in url:
        return _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + HIDDEN, url)
    scheme, rest = url.split("://", 1)
    netloc = _NETLOC.match(rest)
    assert netloc is not None  # the pattern matches the empty string
    host_part, tail = netloc.group(), rest[netloc.end() :]
    if "@" in host_part:
        credentials, host = host_part.rsplit("@", 1)
        host_part = f"{credentials.split(':', 1)[0]}@{host}"
    return f"{scheme}://{host_part}{_QUERY_PASSWORD.sub(lambda m: m.group(1) + HIDDEN, tail)}"
