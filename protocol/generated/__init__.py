"""Generated kio-style types (see protocol.codegen)."""
