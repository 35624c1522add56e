"""Prometheus metrics of a node (one registry per node process)."""
