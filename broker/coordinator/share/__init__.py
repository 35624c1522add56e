"""KIP-932 share groups on the partition leader: share-partition state and share sessions."""
