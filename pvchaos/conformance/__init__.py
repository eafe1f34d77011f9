"""Expectation oracle: what upstream Kubernetes should do, as pure functions.

Suites compare the live cluster against these predictions. The package imports no
Kubernetes client and does no I/O, so every rule here is unit-testable offline;
inputs are objects in their JSON (camelCase) form.
"""
