"""Cluster backends (local, kind, existing) behind one ClusterBackend protocol."""
