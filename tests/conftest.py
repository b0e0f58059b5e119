pytest_plugins = ["durastate.testing.plugin"]
