"""One rule for what the inspector answers to a request it cannot serve, on every route and both engines.

An item that does not exist: a 404 page saying what is missing. A
parameter that is malformed, out of range, repeated, missing where needed
or not a parameter of that page: a 400 page naming it (``ui/params.py``,
the one parser every route reads through). Never a 500, never a parameter
silently ignored. TestClient over ``create_app`` on the store
``durastate.testing.sample.fill`` makes.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient

import durastate
from durastate.cli.ui import create_app
from durastate.testing.sample import Sample

from .browser import parse

BIG = "99999999999999999999999"  # beyond a signed 64-bit integer


@pytest.fixture
def browser(filled: tuple[str, Sample]) -> Iterator[tuple[TestClient, Sample]]:
    url, sample = filled
    with durastate.open(url, read_only=True) as store:
        yield TestClient(create_app(store), base_url="http://127.0.0.1:8765", follow_redirects=False), sample


def _path(template: str, sample: Sample) -> str:
    """``template`` with ``{conv}`` and ``{doc}``: a conversation and a records document the sample made."""
    return template.format(conv=min(sample.conversations), doc=sample.record_document)


def _problem(response: httpx.Response, status: int) -> str:
    """The page's statement of what was wrong, after checking it is an HTML page with ``status``."""
    assert response.status_code == status, (response.request.url, response.text[-600:])
    assert response.headers["content-type"].startswith("text/html")
    return parse(response.text).by_id("problem").text()


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/events/chat-1?after=abc", "after"),
        (f"/events/chat-1?after={BIG}", "after"),
        ("/events/chat-1?after=-1", "after"),
        ("/events/chat-1?after=1&after=2", "after"),  # given twice
        ("/events?after=chat-1", "after"),  # the sessions page pages by cursor: not a parameter of it
        ("/dead-letters/events?after_index=3", "after_index"),  # a position in after_session, which is missing
        ("/documents/runs/1?before=abc", "before"),
        ("/documents/runs/1?before=0", "before"),
        ("/documents/runs/1?before=-5", "before"),
        ("/records/documents/{doc}?at=abc", "at"),  # not a parameter of the page
        ("/records/documents/abc", "id"),
        ("/records/conversations/{conv}?after=abc", "after"),
        (f"/records/conversations/{BIG}", "id"),
        ("/kv?scope=hex:zz", "scope"),
        ("/kv?scope=run-1&ns=cfg&key=model&view=pdf", "view"),
        ("/kv?scope=run-1&ns=log&log=stream&entry_after=x", "entry_after"),
        ("/raw/kv?scope=run-1&ns=log&key=stream&entry=abc", "entry"),
        ("/raw/kv?scope=run-1&ns=log&key=stream&entry=0", "entry"),
        (f"/raw/kv?scope=run-1&ns=log&key=stream&entry={BIG}", "entry"),
        ("/raw/kv?scope=run-1&ns=cfg", "key"),  # missing
        ("/queues/emails?dead_after=abc", "dead_after"),
        ("/raw/queues/fragile?id=abc", "id"),
        ("/raw/queues/fragile", "id"),  # missing
        ("/raw/queues/emails?id=1&cursor=abc", "cursor"),
        ("/presence/room-1?start=-1", "start"),
    ],
)
def test_a_bad_parameter_is_a_400_page_naming_it(browser: tuple[TestClient, Sample], path: str, parameter: str) -> None:
    client, sample = browser
    problem = _problem(client.get(_path(path, sample)), 400)
    assert problem.startswith(f"{parameter}:"), problem


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("/events/nosuch", "nosuch"),
        ("/events/nosuch?after=1", "nosuch"),  # past the end of no session
        ("/kv?scope=nosuch&ns_after=a", "nosuch"),
        ("/kv?scope=run-1&ns=log&log=nosuch&entry_after=1", "nosuch"),
        ("/records/documents/999999", "999999"),
        ("/records/conversations/999999", "999999"),
        ("/documents/nosuch", "nosuch"),
        ("/raw/documents/nosuch", "nosuch"),
        ("/kv?scope=nosuch", "nosuch"),
        ("/kv?scope=run-1&ns=nosuch", "nosuch"),
        ("/kv?scope=run-1&ns=cfg&key=nosuch", "nosuch"),
        ("/kv?scope=run-1&ns=log&log=nosuch", "nosuch"),
        ("/raw/kv?scope=run-1&ns=cfg&key=nosuch", "nosuch"),
        ("/raw/kv?scope=run-1&ns=log&key=stream&entry=99", "99"),
        ("/raw/queues/fragile?id=999", "999"),
    ],
)
def test_an_unknown_item_is_a_404_page_naming_it(browser: tuple[TestClient, Sample], path: str, named: str) -> None:
    client, _ = browser
    assert named in _problem(client.get(path), 404)


@pytest.mark.parametrize(
    "path",
    [
        "/events/chat-1?after=99",  # paging past the end is an empty page, not an error
        "/documents/runs/1?before=2",
        "/kv?scope=run-1&ns=log&log=stream&entry_after=99",
        "/kv?scope=run-1&ns_after=zzz",
        "/records/conversations/{conv}?after=1",
        "/presence/room-1?start=99",
    ],
)
def test_good_parameters_past_the_end_are_answered(browser: tuple[TestClient, Sample], path: str) -> None:
    client, sample = browser
    response = client.get(_path(path, sample))
    assert response.status_code == 200, response.text[-600:]
    assert 'id="problem"' not in response.text


def test_a_cleared_document_has_a_page_with_its_backup(browser: tuple[TestClient, Sample]) -> None:
    # What `durastate docs history scratch` shows: no document now, the backup clear() made of it.
    client, _ = browser
    page = parse(client.get("/documents/scratch").text)
    assert page.by_id("revision").text() == "absent"
    assert [row[0] for row in page.by_id("backups").rows()] == ["scratch.bak"]
    assert not page.find(id="body")
