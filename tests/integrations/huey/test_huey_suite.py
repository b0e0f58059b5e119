"""huey's own ``StorageTests`` (with its slow tests on), on SQLite (file) and PostgreSQL."""

from __future__ import annotations

import os

os.environ["HUEY_SLOW_TESTS"] = "1"  # read by huey.tests.base at import: run the slow tests too

from huey.tests.base import BaseTestCase
from huey.tests.test_storage import StorageTests

from durastate.integrations.huey import DurastateHuey

from .._engines import on_engines


class OnDurastate:
    def get_huey(self) -> DurastateHuey:
        huey = DurastateHuey("storage-tests", url=self.url, utc=False)  # type: ignore[attr-defined]
        self.addCleanup(huey.close)  # type: ignore[attr-defined]
        return huey


on_engines(globals(), "HueyStorage", OnDurastate, StorageTests, BaseTestCase)
