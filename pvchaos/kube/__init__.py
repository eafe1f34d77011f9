"""The only layer that talks to an API server: client, the table of kinds, typed
accessors, waits, polling, cleanup, naming and the invariant snapshot. No pytest, no
allure here; everything above (clusters, chaos, drivers, the plugin, the suites) goes
through it. See docs/architecture.md for the layers and the contract that enforces them."""
