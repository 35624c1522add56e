"""Kafka network layer on asyncio (uvloop): the broker's listener and the client side.

`server.KafkaServer` frames requests and writes responses in request order; what a request means
is the injected handler's business. `client.ClientConnection` / `client.ReconnectingClient` are
the outgoing side (inter-broker traffic, mirror fetchers, the CLI).
"""
