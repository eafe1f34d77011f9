"""pvchaos: chaos and conformance tests for Kubernetes storage scheduling."""
