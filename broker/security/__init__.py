"""Security building blocks: TLS, SASL and ACLs, with no broker layer below them.

TLS contexts from Kafka's ``ssl.*`` keys, JAAS parsing, SASL/PLAIN and SCRAM (RFC 5802 / 7677)
servers and clients, the principal a connection acts as, and the ACL model and authorizer.
Used by the composition root, the API handlers and the network client; imports only
``broker.config`` and ``protocol``.
"""
