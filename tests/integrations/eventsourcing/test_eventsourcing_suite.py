"""eventsourcing's own recorder and factory test cases, on SQLite (file) and PostgreSQL.

The classes come from ``eventsourcing.tests.persistence`` (the suite the
library ships for third-party persistence modules); only ``create_recorder``
and the factory's environment are ours. ``test_insert_subscribe`` runs the
suite's ``optional_test_insert_subscribe`` too.
"""

from __future__ import annotations

from eventsourcing.tests import persistence as suite
from eventsourcing.utils import Environment

from durastate.integrations import eventsourcing as es

from .._engines import on_engines


class Aggregate:
    def create_recorder(self) -> es.DurastateAggregateRecorder:
        return es.DurastateAggregateRecorder(self.open_store(), purpose="snapshots")  # type: ignore[attr-defined]


class Application:
    def create_recorder(self) -> es.DurastateApplicationRecorder:
        return es.DurastateApplicationRecorder(self.open_store())  # type: ignore[attr-defined]

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()  # type: ignore[attr-defined]


class NonInterleaving:
    def create_recorder(self) -> es.DurastateApplicationRecorder:
        return es.DurastateApplicationRecorder(self.open_store())  # type: ignore[attr-defined]


class TrackingRecorder:
    def create_recorder(self) -> es.DurastateTrackingRecorder:
        return es.DurastateTrackingRecorder(self.open_store())  # type: ignore[attr-defined]


class Process:
    def create_recorder(self) -> es.DurastateProcessRecorder:
        return es.DurastateProcessRecorder(self.open_store())  # type: ignore[attr-defined]


class MyTrackingRecorder(es.DurastateTrackingRecorder):
    """A user's subclass, named by topic in the factory test."""


class FactoryCase:
    def setUp(self) -> None:
        # EngineCase.setUp has made self.url; the suite's setUp builds the factory from env.
        self.env = Environment(
            "",
            {"PERSISTENCE_MODULE": "durastate.integrations.eventsourcing", "DURASTATE_URL": self.url},  # type: ignore[attr-defined]
        )
        super().setUp()  # type: ignore[misc]

    def expected_factory_class(self) -> type[es.Factory]:
        return es.Factory

    def expected_aggregate_recorder_class(self) -> type[es.DurastateAggregateRecorder]:
        return es.DurastateAggregateRecorder

    def expected_application_recorder_class(self) -> type[es.DurastateApplicationRecorder]:
        return es.DurastateApplicationRecorder

    def expected_tracking_recorder_class(self) -> type[es.DurastateTrackingRecorder]:
        return es.DurastateTrackingRecorder

    def tracking_recorder_subclass(self) -> type[es.DurastateTrackingRecorder]:
        return MyTrackingRecorder

    def expected_process_recorder_class(self) -> type[es.DurastateProcessRecorder]:
        return es.DurastateProcessRecorder


on_engines(globals(), "AggregateRecorder", Aggregate, suite.AggregateRecorderTestCase)
on_engines(globals(), "ApplicationRecorder", Application, suite.ApplicationRecorderTestCase)
on_engines(globals(), "TrackingRecorder", TrackingRecorder, suite.TrackingRecorderTestCase)
on_engines(globals(), "ProcessRecorder", Process, suite.ProcessRecorderTestCase)
on_engines(globals(), "NonInterleavingNotificationIDs", NonInterleaving, suite.NonInterleavingNotificationIDsBaseCase)
on_engines(globals(), "InfrastructureFactory", FactoryCase, suite.InfrastructureFactoryTestCase)
