"""The inspector's writes, only with ``durastate ui --allow-writes``: redrive and purge dead letters.

What exists: redrive (all, or one) and purge (all, or one) of a queue's
dead letters (``queues.redrive`` / ``queues.delete_dead``) and of an event
session's (``events.redrive`` / ``events.discard``: an event stays in its
session's log, so purging one settles it unprocessed and its lane moves
on). Without the flag these routes do not exist (404) and the store is
opened read-only.

Each action is two requests:

1. ``GET /confirm?action=...&target=...[&id=...]`` says what will happen
   (with the current count) and holds a form;
2. ``POST /actions/<action>`` with that form does it, then sends the browser
   back (303) to the page it came from, with what it did in the address.

Cross-site requests are refused (403, nothing done) three ways, any of
which alone stops a forged form post from another origin:

* a **CSRF token** in the form: ``nonce.mac``, where ``mac`` is an HMAC of
  the nonce and the action under a key derived from the guard's token
  (``durastate ui --token``) or, without one, a random key made when the
  inspector starts. Another origin cannot read the confirm page (the Host
  allow-list and the same-origin policy), so it cannot know a valid token;
  a token for one action and target does not work for another.
* **Origin**: when the browser sends it, it must name a host the guard
  allows, with this port;
* **Sec-Fetch-Site**: when the browser sends it, it must be
  ``same-origin``.

The token cookie the guard sets beyond loopback is ``SameSite=Strict``,
which already keeps it off cross-site posts; these checks also cover the
loopback case, where there is no cookie at all.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlsplit

import durastate
from durastate.errors import InvalidRequest

from .._format import decode_bytes
from .guard import host_name

MAX_FORM = 64 * 1024  # bytes of a form body read at most


@dataclass(frozen=True)
class Action:
    """One kind of write: what it acts on and how to say it."""

    name: str
    facet: str  # "queue" or "events"
    verb: str  # shown on the confirm button
    danger: bool  # purges cannot be undone


ACTIONS = {
    a.name: a
    for a in (
        Action("queue-redrive", "queue", "Redrive", False),
        Action("queue-purge", "queue", "Purge", True),
        Action("events-redrive", "events", "Redrive", False),
        Action("events-purge", "events", "Purge", True),
    )
}


class Csrf:
    """Issues and checks the per-form tokens (see the module docstring)."""

    def __init__(self, guard_token: str | None) -> None:
        seed = guard_token.encode() if guard_token else secrets.token_bytes(32)
        self._key = hashlib.sha256(b"durastate-ui-csrf\x00" + seed).digest()

    def _mac(self, nonce: str, action: str, target: str, item: str) -> str:
        message = "\x00".join((nonce, action, target, item)).encode("utf-8", "surrogateescape")
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def issue(self, action: str, target: str, item: str) -> str:
        nonce = secrets.token_urlsafe(16)
        return f"{nonce}.{self._mac(nonce, action, target, item)}"

    def valid(self, token: str, action: str, target: str, item: str) -> bool:
        nonce, _, mac = token.partition(".")
        return bool(nonce) and hmac.compare_digest(mac, self._mac(nonce, action, target, item))


def same_origin(headers: dict[str, str], hosts: frozenset[str]) -> str | None:
    """Why a POST looks cross-site (``None``: it does not). ``headers``: lower-case names."""
    site = headers.get("sec-fetch-site")
    if site is not None and site != "same-origin":
        return f"Sec-Fetch-Site is {site!r}"
    origin = headers.get("origin")
    if origin is not None:
        if origin == "null":
            return "Origin is null"
        parts = urlsplit(origin)
        host = headers.get("host", "")
        if parts.netloc.lower() != host.lower() or host_name(parts.netloc) not in hosts:
            return f"Origin {origin!r} is not this inspector ({host!r})"
    return None


def parse_form(body: bytes) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (the only kind the confirm form posts)."""
    if len(body) > MAX_FORM:
        raise InvalidRequest(f"a form of {len(body)} bytes is more than an action needs")
    return dict(parse_qsl(body.decode("utf-8", "surrogateescape"), keep_blank_values=True))


def item_id(text: str) -> int | None:
    """The optional id (a dead letter's id, an event's index) of a form or query: ``""`` means all."""
    if text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        raise InvalidRequest(f"id must be an integer, got {text!r}") from None
    if value < 1:
        raise InvalidRequest(f"id must be >= 1, got {value}")
    return value


def pending(store: durastate.Store, action: Action, target: str, ident: int | None) -> int:
    """How many dead letters the action would touch now (for the confirm page)."""
    if action.facet == "queue":
        name = decode_bytes(target)
        if ident is None:
            return store.queues.stats(name).dead
        letters = store.queues.dead_letters(name, after=ident - 1, limit=1)
        return 1 if letters and letters[0].id == ident else 0
    if ident is None:
        count, after = 0, 0
        while True:  # a session's dead letters, paged (the facet has no count of them alone)
            page = store.events.dead_letters(target, after=after, limit=1000)
            count += len(page)
            if len(page) < 1000:
                return count
            after = page[-1].index
    events = store.events.dead_letters(target, after=ident - 1, limit=1)
    return 1 if events and events[0].index == ident else 0


def run(store: durastate.Store, action: Action, target: str, ident: int | None) -> int:
    """Do it through the facet's public API; how many dead letters moved or went."""
    ids = None if ident is None else [ident]
    if action.name == "queue-redrive":
        return store.queues.redrive(decode_bytes(target), ids)
    if action.name == "queue-purge":
        return store.queues.delete_dead(decode_bytes(target), ids)
    if action.name == "events-purge":
        return store.events.discard(target, ids)
    return store.events.redrive(target, ids)


def back_to(action: Action, target: str) -> str:
    """The page the action was started from."""
    if action.facet == "queue":
        return "/queues/" + quote(target, safe="")
    return "/events/" + quote(target, safe="")
