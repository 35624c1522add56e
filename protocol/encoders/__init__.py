"""Hand-written encoders (and the Produce request parser) for the hot-path messages.

They produce exactly the bytes kio's generic writer would, several times faster; record batches
are passed through as opaque buffers, never copied.
"""
