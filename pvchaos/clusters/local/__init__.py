"""The embedded backend: a real control plane built from Go modules, nodes by KWOK."""
