"""pvchaos: chaos and conformance tests for Kubernetes storage scheduling."""

__version__ = "0.2.0"  # as pyproject.toml; 0.2 moved the packages under pvchaos. and reshaped the faults
