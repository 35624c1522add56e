"""The metadata quorum. For now one voter: a record is committed once it is durable in the local log."""
