pytest_plugins = ["durastate.testing.plugin"]


def pytest_collection_finish(session: object) -> None:
    """Start pi-durable's own suite (two subprocesses, minutes long) as soon as the test that checks it
    is selected, so it runs beside the rest of the suite instead of after it."""
    for item in getattr(session, "items", []):
        module = getattr(item, "module", None)
        if module is not None and module.__name__.endswith("test_pi_durable_upstream"):
            module.start_in_background()
            return
