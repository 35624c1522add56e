"""Request handlers, one module per RPC family; each module's header lists the versions it serves."""
