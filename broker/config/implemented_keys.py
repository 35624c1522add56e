"""The server.properties keys kmirror acts on.

Every other key of the catalog (catalog.py) is accepted and reported in one warning line.
"""

from __future__ import annotations

IMPLEMENTED_KEYS: frozenset[str] = frozenset(
    {
        "node.id", "process.roles", "listeners", "advertised.listeners",
        "controller.listener.names", "listener.security.protocol.map",
        "inter.broker.listener.name", "security.inter.broker.protocol",
        "controller.quorum.voters", "controller.quorum.bootstrap.servers",
        "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
        "log.dirs", "log.dir", "metadata.log.dir",
        "metadata.log.max.record.bytes.between.snapshots", "metadata.log.max.snapshot.interval.ms",
        "num.partitions", "default.replication.factor", "min.insync.replicas",
        "auto.create.topics.enable", "delete.topic.enable", "message.max.bytes",
        "socket.request.max.bytes", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
        "queued.max.requests", "connections.max.idle.ms", "connections.max.reauth.ms", "num.network.threads", "num.io.threads",
        "queued.max.request.bytes", "sasl.server.max.receive.size",
        "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
        "max.connection.creation.rate", "quota.window.num", "quota.window.size.seconds",
        "controller.quota.window.num", "controller.quota.window.size.seconds",
        "request.timeout.ms", "fetch.max.bytes",
        "log.segment.bytes", "log.roll.ms", "log.roll.hours",
        "log.retention.ms", "log.retention.minutes", "log.retention.hours",
        "log.retention.bytes", "log.retention.check.interval.ms", "log.cleanup.policy",
        "log.flush.interval.messages", "log.flush.interval.ms", "log.flush.scheduler.interval.ms",
        "log.flush.offset.checkpoint.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
        "replica.high.watermark.checkpoint.interval.ms",
        "log.index.size.max.bytes", "log.index.interval.bytes", "log.segment.delete.delay.ms",
        "log.cleaner.enable", "log.cleaner.backoff.ms", "log.cleaner.threads",
        "log.cleaner.io.max.bytes.per.second", "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.message.timestamp.type", "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms", "compression.type", "unclean.leader.election.enable",
        "num.recovery.threads.per.data.dir",
        "offsets.topic.num.partitions", "offsets.topic.replication.factor",
        "offsets.topic.segment.bytes", "offsets.retention.minutes",
        "offsets.retention.check.interval.ms", "offsets.commit.timeout.ms",
        "group.initial.rebalance.delay.ms", "group.min.session.timeout.ms",
        "group.max.session.timeout.ms", "group.max.size",
        "group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms",
        "group.consumer.assignors", "group.consumer.max.size", "group.consumer.migration.policy",
        "group.share.enable", "group.share.session.timeout.ms",
        "group.share.heartbeat.interval.ms", "group.share.max.size",
        "group.share.record.lock.duration.ms", "group.share.delivery.count.limit",
        "group.share.partition.max.record.locks", "share.auto.offset.reset",
        "group.share.max.share.sessions",
        # the bounds of per-group configs (group_configs)
        "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
        "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
        "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
        "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
        "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
        "share.coordinator.state.topic.num.partitions",
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
        "group.coordinator.rebalance.protocols",
        "transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr", "transaction.state.log.segment.bytes",
        "transaction.max.timeout.ms", "transactional.id.expiration.ms",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "transaction.partition.verification.enable",
        "producer.id.expiration.ms", "producer.id.expiration.check.interval.ms",
        "replica.lag.time.max.ms", "replica.fetch.max.bytes", "replica.fetch.wait.max.ms",
        "replica.fetch.min.bytes", "replica.fetch.response.max.bytes", "num.replica.fetchers",
        "replica.fetch.backoff.ms",
        "broker.heartbeat.interval.ms", "broker.session.timeout.ms", "broker.rack",
        "unstable.api.versions.enable", "unstable.feature.versions.enable",
        "metrics.port", "metrics.host",
        "mirror.topic.num.partitions", "mirror.topic.replication.factor",
        "mirror.num.replica.fetchers", "mirror.metadata.refresh.interval.ms",
        "mirror.replication.throttled.rate", "mirror.truncation.timeout.ms",
        "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
        "auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds",
        "log.max.open.files",
    }
    | {
        # TLS and SASL listeners (broker.security), also as listener.name.<listener>.<key>
        "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
        "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
        "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
        "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols",
        "ssl.protocol", "ssl.cipher.suites", "sasl.enabled.mechanisms", "sasl.jaas.config",
        "connection.failed.authentication.delay.ms",
        # this node's own connections to its peers (broker.security.node_links)
        "sasl.mechanism.controller.protocol", "sasl.mechanism.inter.broker.protocol",
        "ssl.endpoint.identification.algorithm", "ssl.principal.mapping.rules",
    }
    | {
        # secrets at rest (broker.security.password_encoder)
        "password.encoder.secret", "password.encoder.old.secret",
        "password.encoder.keyfactory.algorithm", "password.encoder.cipher.algorithm",
        "password.encoder.key.length", "password.encoder.iterations",
    }
)  # fmt: skip
