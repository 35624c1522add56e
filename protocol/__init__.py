"""Sans-IO Kafka wire codec for kmirror.

Pure functions and views over buffers: framing, headers, the message registry (kio's types and
our generated ones), record batches and hand-written hot-path encoders. Nothing here imports
asyncio, sockets or ``broker``; an import-linter contract in ``pyproject.toml`` holds that.
"""
