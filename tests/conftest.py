"""The harness's own tests. `pytester` runs small pytest sessions in-process, with the
pvchaos plugin loaded by its entry point, as a user's suite would have it."""

pytest_plugins = ["pytester"]
