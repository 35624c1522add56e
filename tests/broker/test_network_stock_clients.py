"""Stock Kafka clients (librdkafka, kafka-python) list topics through KafkaServer + the toy handler."""

import asyncio

from .network_support import ToyBroker, run, start_server


def test_confluent_admin_client_lists_topics() -> None:
    from confluent_kafka.admin import AdminClient

    async def main() -> None:
        server = await start_server(ToyBroker(topics=("orders", "payments")))
        host, port = server.address()

        def list_topics() -> tuple[set[str], dict[int, str], str | None]:
            admin = AdminClient({"bootstrap.servers": f"{host}:{port}", "socket.timeout.ms": 5000})
            md = admin.list_topics(timeout=5)
            brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
            return set(md.topics), brokers, md.cluster_id

        topics, brokers, cluster_id = await asyncio.get_running_loop().run_in_executor(
            None, list_topics
        )
        assert topics == {"orders", "payments"}
        assert brokers == {1: f"{host}:{port}"}
        assert cluster_id == "toy-cluster"
        assert server.requests >= 2
        await server.close(timeout=0.5)

    run(main())


def test_kafka_python_admin_client_lists_topics() -> None:
    from kafka import KafkaAdminClient

    async def main() -> None:
        server = await start_server(ToyBroker(topics=("events",)))
        host, port = server.address()

        def list_topics() -> list[str]:
            admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=5000)
            try:
                return sorted(admin.list_topics())
            finally:
                admin.close()

        assert await asyncio.get_running_loop().run_in_executor(None, list_topics) == ["events"]
        await server.close(timeout=0.5)

    run(main())
