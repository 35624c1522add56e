"""Partitions this node hosts: leadership, high watermark, waiting fetches."""
