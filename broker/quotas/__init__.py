"""Client quotas (KIP-13/124/219): the sans-IO enforcement core."""
