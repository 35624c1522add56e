"""Cluster Mirroring (KIP-1279): source client, mirror fetchers, and the per-partition state driver."""
