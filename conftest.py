"""Root conftest: loads the pvchaos pytest plugin for the suites and the harness's tests."""

pytest_plugins = ["pvchaos.plugin"]
