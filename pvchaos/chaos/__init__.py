"""Fault injectors. Each registers its undo on a Cleanup *before* acting, returns what
it touched, and raises if it could only partly act, so an interrupted run restores."""
