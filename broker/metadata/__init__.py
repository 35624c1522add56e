"""The metadata image: an immutable view of committed metadata records, and the deltas between images."""
