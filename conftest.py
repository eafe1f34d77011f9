"""Root conftest. The pvchaos plugin itself is loaded by its `pytest11` entry point
(pyproject.toml), as it is for a suite in any other repository."""
