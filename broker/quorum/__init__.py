"""The metadata quorum for real: the sans-IO Raft core (``broker.raft``) over the node's
``__cluster_metadata-0`` log and its snapshot files, driven on the event loop."""
