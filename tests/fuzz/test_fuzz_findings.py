"""What the fuzz suites found, pinned: each case once, deterministically, on every engine it concerns.

Each test names the entry point and the input that broke the contract
(only documented errors; a refused call changes nothing), and checks the
fixed behaviour.
"""

from __future__ import annotations

import pytest

import durastate

INT64_MAX = 2**63 - 1


# -- facets and engines -----------------------------------------------------------


@pytest.mark.parametrize("keep_last", [INT64_MAX + 1, 2**64, 10**30])
def test_kv_trim_log_keep_last_past_int64_keeps_everything(store: durastate.Store, keep_last: int) -> None:
    # Was: OverflowError from the driver binding keep_last - 1.
    store.kv.append(b"s", b"n", b"k", b"v")
    assert store.kv.trim_log(b"s", b"n", b"k", keep_last=keep_last) == 0
    assert store.kv.trim_log(b"s", b"n", b"k", keep_last=keep_last, older_than=0) == 0
    assert [v for _, v in store.kv.log(b"s", b"n", b"k")] == [b"v"]
