"""What the three ADK services share: addresses, JSON, and errors that are both ADK's and durastate's.

Addresses. Every document key of this integration starts with ``adk/`` and
then a kind letter; the caller's names (app, user, session, filename) are
path segments escaped so that a ``/`` inside a name can never be read as a
separator: ``%`` becomes ``%25``, ``/`` ``%2F`` and NUL ``%00`` (durastate
keys hold no NUL). So the key of one address is the prefix of no other
address's key except by the separator, and a prefix range lists exactly one
app's or one user's entries.

JSON. ADK's models dump themselves to JSON (pydantic); state values go
through ``pydantic_core.to_jsonable_python`` first, which is what ADK's own
SQL services do (``_session_util.make_json_safe_state`` in google-adk 2.13):
sets, frozensets and tuples become lists; Decimals, UUIDs, dates, times and
datetimes ISO strings; bytes UTF-8 text; models dicts. They read back so.
Where they then fall back to ``str(value)`` with a warning (a lossy write),
this integration refuses with ``durastate.InvalidRequest`` and writes
nothing; so it does for NaN and infinities (pydantic would write ``null``)
and for integers outside signed 64 bits (the documents facet's rule).
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from ..._json import dump_json, has_non_finite
from ..._validate import fail, fail_type
from ...errors import Conflict, InvalidRequest, NotFound

try:
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.input_validation_error import InputValidationError
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.sessions.base_session_service import BaseSessionService  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(f"durastate.integrations.adk needs Google ADK: pip install 'durastate[adk]' ({exc})") from exc

from google.adk.errors._stale_session_error import StaleSessionError

__all__ = [
    "ArtifactInputError",
    "SessionExists",
    "SessionNotFound",
    "StaleSession",
    "dump_model",
    "json_safe",
    "name",
    "segment",
    "unsegment",
]

PREFIX = "adk/"


class SessionExists(AlreadyExistsError, Conflict):
    """``create_session`` with a session id that is taken: ADK's ``AlreadyExistsError`` and ``durastate.Conflict``."""


class SessionNotFound(SessionNotFoundError, NotFound):
    """``append_event`` to a session that is not stored: ADK's ``SessionNotFoundError`` and ``durastate.NotFound``."""


class StaleSession(StaleSessionError, Conflict):
    """``append_event`` with a session object older than the stored session.

    ADK's ``StaleSessionError`` (a ``ValueError``) and ``durastate.Conflict``:
    reload the session with ``get_session`` and append again.
    """


class ArtifactInputError(InputValidationError, InvalidRequest):
    """An artifact call ADK refuses (``InputValidationError``), also ``durastate.InvalidRequest``."""


def name(label: str, value: Any) -> str:
    """``value`` if it is a ``str`` that UTF-8 can encode, else ``InvalidRequest`` naming ``label``."""
    if not isinstance(value, str):
        fail_type(label, "a str", value)
    text = str.__str__(value)  # a str subclass's own __str__ does not decide the address
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            fail(f"{label} must be valid unicode (no lone surrogates), got {text!r}")
    return text


def segment(value: str) -> str:
    """``value`` escaped as one key segment (see the module docstring)."""
    if "%" in value:
        value = value.replace("%", "%25")
    if "/" in value:
        value = value.replace("/", "%2F")
    if "\x00" in value:
        value = value.replace("\x00", "%00")
    return value


_ESCAPED = re.compile("%(25|2F|00)")
_UNESCAPED = {"25": "%", "2F": "/", "00": "\x00"}


def unsegment(value: str) -> str:
    """The name ``segment`` escaped (read left to right: ``%252F`` is ``%2F``)."""
    return _ESCAPED.sub(lambda match: _UNESCAPED[match.group(1)], value) if "%" in value else value


def refuse(what: str, exc: Exception) -> NoReturn:
    raise InvalidRequest(f"{what} cannot be stored as JSON: {exc}") from None


def json_safe(what: str, value: dict[str, Any]) -> dict[str, Any]:
    """``value`` with every member in its JSON form, as ADK's SQL services convert state.

    A member pydantic cannot convert is refused (``InvalidRequest``) instead of
    being stored as its ``str()``; so are NaN, infinities and integers beyond
    64 bits (checked here, before the caller changes anything, although the
    documents facet would refuse them too).
    """
    if not value:
        return {}
    try:
        converted: dict[str, Any] = to_jsonable_python(value)
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        _refuse_member(what, value, exc)
    dump_json(what, converted)
    return converted


def _refuse_member(what: str, value: dict[str, Any], exc: Exception) -> NoReturn:
    """``refuse`` naming the first key of ``value`` whose member pydantic cannot convert, and why in words.

    Only on the refusal path: each member is converted again alone.
    """
    for key, member in value.items():
        try:
            to_jsonable_python(member)
        except (PydanticSerializationError, TypeError, ValueError) as member_exc:
            what, exc = f"{what}[{key!r}]", member_exc
            break
    if isinstance(exc, UnicodeDecodeError):
        raise InvalidRequest(
            f"{what} cannot be stored as JSON: it holds bytes that are not UTF-8 text (ADK's services store "
            f"bytes as UTF-8 text; encode them, as base64 say, before putting them in state): {exc}"
        ) from None
    refuse(what, exc)


def dump_model(what: str, model: BaseModel) -> bytes:
    """``model`` as compact JSON (``exclude_none``, as ADK's SQLite service stores events); refusals as above."""
    try:
        blob = model.__pydantic_serializer__.to_json(model, exclude_none=True)
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        refuse(what, exc)
    # pydantic writes NaN and infinities as null: only a blob with a null in
    # it can hide one, and only then is the (slower) walk worth it.
    if b"null" in blob and has_non_finite(model.model_dump(exclude_none=True)):
        raise InvalidRequest(f"{what} cannot be stored as JSON: it contains NaN or an infinity")
    return blob
