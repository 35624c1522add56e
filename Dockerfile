# A kmirror node. docker-compose.yml builds it for its destination service; on its own:
#   docker build -t kmirror . && docker run -e KMIRROR_CLUSTER_ID=<22-char id> kmirror
# The command is the node's server.properties (default: config/docker/kmirror-1.properties);
# the entry point formats the log dirs on the first start, then runs bin/kafka-server-start.sh.
FROM python:3.11-slim

WORKDIR /opt/kmirror
# The bin/ scripts run .venv/bin/python, so the project is installed into that venv.
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY broker ./broker
COPY audit ./audit
RUN python -m venv .venv \
    && .venv/bin/pip install --no-cache-dir --upgrade pip \
    && .venv/bin/pip install --no-cache-dir .
COPY bin ./bin
COPY config ./config

# Client listener (inside the compose network), client listener for the host, Prometheus.
EXPOSE 9092 19092 9308
VOLUME /var/lib/kmirror
ENTRYPOINT ["bin/docker-entrypoint.sh"]
CMD ["config/docker/kmirror-1.properties"]
