"""Broker configuration: .properties parsing, the Kafka key catalog, typed server config."""
