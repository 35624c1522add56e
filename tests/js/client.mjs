// kafkajs driven by tests/integration/test_kafkajs.py: one JSON command in, JSON out.
//
//   node client.mjs '{"bootstrap": "127.0.0.1:9092", "steps": [{"op": "createTopics", ...}, ...]}'
//     runs the steps in order on one client and prints one line:
//     {"results": [{"ok": <value>} | {"error": {"name", "type", "code", "message"}}, ...]}
//
//   node client.mjs '{"bootstrap": ..., "member": {"groupId", "topics", ...}}'
//     a long-running consumer-group member: prints one JSON line per event
//     ({"event": "ready" | "assigned" | "record" | "crash" | "stopped", ...}) and leaves the group
//     cleanly when a line "stop" arrives on stdin (or stdin closes).
//
// A steps command may also come on stdin when argv has none (a member's must be in argv: its
// stdin carries "stop"). kafkajs logs go to stderr so stdout
// carries only JSON. A watchdog ("deadlineMs", default 30 s) ends a stuck process with code 3.
import { createInterface } from 'node:readline'
import kafkajs from 'kafkajs'

const { Kafka, CompressionTypes, ConfigResourceTypes, logLevel } = kafkajs
process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= '1' // the v2 default partitioner is what we want

const COMPRESSION = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }
const RESOURCE = { topic: ConfigResourceTypes.TOPIC, broker: ConfigResourceTypes.BROKER }
const LOG_LEVEL = {
  nothing: logLevel.NOTHING,
  error: logLevel.ERROR,
  warn: logLevel.WARN,
  info: logLevel.INFO,
  debug: logLevel.DEBUG,
}

// A name the table lacks is an error, never a silent default.
function pick(table, name, what) {
  if (!Object.hasOwn(table, name)) throw new Error(`unknown ${what} ${JSON.stringify(name)}`)
  return table[name]
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

function stderrLogger() {
  return ({ namespace, label, log }) => {
    process.stderr.write(`${label} [${namespace}] ${JSON.stringify(log)}\n`)
  }
}

function errorJson(e) {
  return {
    name: e?.name ?? 'Error',
    type: e?.type ?? null,
    code: e?.code ?? null,
    message: String(e?.message ?? e),
    retriable: e?.retriable ?? null,
    topic: e?.topic ?? null,
    cause: e?.cause ? errorJson(e.cause) : null,
    // KafkaJSAggregateError (createTopics, ...) carries one error per failed item
    errors: Array.isArray(e?.errors) ? e.errors.map(errorJson) : null,
    // KafkaJSDeleteTopicRecordsError: one {partition, error} per partition
    partitions: Array.isArray(e?.partitions)
      ? e.partitions.map((p) => ({ partition: p.partition, error: p.error ? errorJson(p.error) : null }))
      : null,
    // KafkaJSDeleteGroupsError: one {groupId, errorCode, error} per group
    groups: Array.isArray(e?.groups)
      ? e.groups.map((g) => ({ groupId: g.groupId, errorCode: g.errorCode, error: g.error ? errorJson(g.error) : null }))
      : null,
  }
}

// Records go over JSON as UTF-8 strings (null stays null); headers as {key: string | string[]}.
function toMessage(m) {
  const out = { value: m.value ?? null }
  if (m.key !== undefined) out.key = m.key
  if (m.partition !== undefined) out.partition = m.partition
  if (m.headers !== undefined) out.headers = m.headers
  if (m.timestamp !== undefined) out.timestamp = String(m.timestamp)
  return out
}

function fromMessage(topic, partition, m) {
  const str = (b) => (b === null || b === undefined ? null : b.toString('utf8'))
  const headers = {}
  for (const [k, v] of Object.entries(m.headers ?? {})) {
    headers[k] = Array.isArray(v) ? v.map(str) : str(v)
  }
  return {
    topic,
    partition,
    offset: Number(m.offset),
    timestamp: Number(m.timestamp),
    key: str(m.key),
    value: str(m.value),
    headers,
  }
}

function topicMessages(step) {
  return (step.topicMessages ?? [{ topic: step.topic, messages: step.messages }]).map((t) => ({
    topic: t.topic,
    messages: t.messages.map(toMessage),
  }))
}

function normalise(v) {
  // RecordMetadata and friends: drop undefined, keep numbers as JSON numbers where safe.
  return JSON.parse(JSON.stringify(v ?? null))
}

class Session {
  constructor(cmd) {
    this.kafka = new Kafka({
      clientId: cmd.clientId ?? 'kmirror-kafkajs-test',
      brokers: [cmd.bootstrap],
      connectionTimeout: cmd.connectionTimeout ?? 3000,
      requestTimeout: cmd.requestTimeout ?? 10000,
      retry: { retries: cmd.retries ?? 5, initialRetryTime: 100, maxRetryTime: 2000 },
      logLevel: pick(LOG_LEVEL, cmd.logLevel ?? 'warn', 'log level'),
      logCreator: stderrLogger,
    })
    this.producers = new Map() // keyed by the producer options, so steps can share one
    this.admin = null
    this.txns = new Map()
  }

  async getAdmin() {
    if (!this.admin) {
      this.admin = this.kafka.admin()
      await this.admin.connect()
    }
    return this.admin
  }

  async getProducer(opts) {
    const key = JSON.stringify(opts ?? {})
    if (!this.producers.has(key)) {
      const p = this.kafka.producer({ allowAutoTopicCreation: false, ...(opts ?? {}) })
      await p.connect()
      this.producers.set(key, p)
    }
    return this.producers.get(key)
  }

  async close() {
    for (const p of this.producers.values()) await p.disconnect().catch(() => {})
    if (this.admin) await this.admin.disconnect().catch(() => {})
  }

  // --- one method per step op ---------------------------------------------------------------

  async createTopics(s) {
    const admin = await this.getAdmin()
    const created = await admin.createTopics({
      waitForLeaders: true,
      validateOnly: s.validateOnly ?? false,
      timeout: 10000,
      topics: s.topics.map((t) => ({
        topic: t.topic,
        numPartitions: t.numPartitions ?? 1,
        replicationFactor: t.replicationFactor ?? 1,
        configEntries: Object.entries(t.configs ?? {}).map(([name, value]) => ({ name, value })),
      })),
    })
    return { created }
  }

  async listTopics() {
    return (await (await this.getAdmin()).listTopics()).sort()
  }

  async fetchTopicMetadata(s) {
    const md = await (await this.getAdmin()).fetchTopicMetadata({ topics: s.topics })
    return normalise(md)
  }

  async describeCluster() {
    return normalise(await (await this.getAdmin()).describeCluster())
  }

  async deleteTopics(s) {
    await (await this.getAdmin()).deleteTopics({ topics: s.topics, timeout: 10000 })
    return null
  }

  async createPartitions(s) {
    await (await this.getAdmin()).createPartitions({
      validateOnly: s.validateOnly ?? false,
      timeout: 10000,
      topicPartitions: s.topicPartitions,
    })
    return null
  }

  async describeConfigs(s) {
    const res = await (await this.getAdmin()).describeConfigs({
      includeSynonyms: s.includeSynonyms ?? false,
      resources: s.resources.map((r) => ({
        type: pick(RESOURCE, r.type, 'resource type'),
        name: r.name,
        configNames: r.configNames,
      })),
    })
    return normalise(res)
  }

  async alterConfigs(s) {
    const res = await (await this.getAdmin()).alterConfigs({
      validateOnly: s.validateOnly ?? false,
      resources: s.resources.map((r) => ({
        type: pick(RESOURCE, r.type, 'resource type'),
        name: r.name,
        configEntries: Object.entries(r.configs).map(([name, value]) => ({ name, value })),
      })),
    })
    return normalise(res)
  }

  async fetchTopicOffsets(s) {
    const rows = await (await this.getAdmin()).fetchTopicOffsets(s.topic)
    return rows
      .map((r) => ({ partition: r.partition, offset: +r.offset, high: +r.high, low: +r.low }))
      .sort((a, b) => a.partition - b.partition)
  }

  async fetchTopicOffsetsByTimestamp(s) {
    const rows = await (await this.getAdmin()).fetchTopicOffsetsByTimestamp(s.topic, s.timestamp)
    return rows.map((r) => ({ partition: r.partition, offset: +r.offset }))
  }

  async deleteTopicRecords(s) {
    await (await this.getAdmin()).deleteTopicRecords({
      topic: s.topic,
      partitions: s.partitions.map((p) => ({ partition: p.partition, offset: String(p.offset) })),
    })
    return null
  }

  async fetchOffsets(s) {
    const res = await (await this.getAdmin()).fetchOffsets({
      groupId: s.groupId,
      topics: s.topics,
      resolveOffsets: s.resolveOffsets ?? false,
    })
    return res.map((t) => ({
      topic: t.topic,
      partitions: t.partitions
        .map((p) => ({ partition: p.partition, offset: +p.offset, metadata: p.metadata }))
        .sort((a, b) => a.partition - b.partition),
    }))
  }

  async setOffsets(s) {
    await (await this.getAdmin()).setOffsets({
      groupId: s.groupId,
      topic: s.topic,
      partitions: s.partitions.map((p) => ({ partition: p.partition, offset: String(p.offset) })),
    })
    return null
  }

  async listGroups() {
    const { groups } = await (await this.getAdmin()).listGroups()
    return groups.sort((a, b) => a.groupId.localeCompare(b.groupId))
  }

  async describeGroups(s) {
    const { groups } = await (await this.getAdmin()).describeGroups(s.groupIds)
    // memberMetadata / memberAssignment are Buffers: report their sizes only.
    return groups.map((g) => ({
      ...g,
      members: g.members.map((m) => ({
        memberId: m.memberId,
        clientId: m.clientId,
        clientHost: m.clientHost,
        metadataBytes: m.memberMetadata.length,
        assignmentBytes: m.memberAssignment.length,
      })),
    }))
  }

  async deleteGroups(s) {
    return normalise(await (await this.getAdmin()).deleteGroups(s.groupIds))
  }

  async produce(s) {
    const p = await this.getProducer(s.producer)
    const res = await p.sendBatch({
      acks: s.acks ?? -1,
      timeout: s.timeout ?? 10000,
      compression: pick(COMPRESSION, s.compression ?? 'none', 'compression'),
      topicMessages: topicMessages(s),
    })
    return normalise(res)
  }

  async consume(s) {
    // Joins s.groupId, reads until s.count records arrived (or s.timeoutMs), then leaves.
    const consumer = this.kafka.consumer({
      groupId: s.groupId,
      sessionTimeout: 6000,
      heartbeatInterval: 300,
      maxWaitTimeInMs: 200,
      readUncommitted: s.readUncommitted ?? false,
      allowAutoTopicCreation: false,
    })
    const records = []
    let done
    const finished = new Promise((resolve) => (done = resolve))
    const timer = setTimeout(() => done('timeout'), s.timeoutMs ?? 10000)
    let crash = null
    consumer.on(consumer.events.CRASH, (e) => {
      crash = errorJson(e.payload.error)
      done('crash')
    })
    try {
      await consumer.connect()
      await consumer.subscribe({ topics: s.topics, fromBeginning: s.fromBeginning ?? true })
      await consumer.run({
        autoCommit: s.autoCommit ?? true,
        eachMessage: async ({ topic, partition, message }) => {
          records.push(fromMessage(topic, partition, message))
          if (records.length >= s.count) done('count')
        },
      })
      const why = await finished
      return { why, crash, records }
    } finally {
      clearTimeout(timer)
      await consumer.disconnect()
    }
  }

  async transaction(s) {
    // One transaction: send, optionally sendOffsets for a group, then commit or abort.
    const p = await this.getProducer({
      transactionalId: s.transactionalId,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: s.transactionTimeout ?? 30000,
    })
    const txn = await p.transaction()
    try {
      for (const t of topicMessages(s)) {
        await txn.send({
          ...t,
          acks: -1,
          compression: pick(COMPRESSION, s.compression ?? 'none', 'compression'),
        })
      }
      if (s.sendOffsets) {
        await txn.sendOffsets({
          consumerGroupId: s.sendOffsets.groupId,
          topics: s.sendOffsets.topics.map((t) => ({
            topic: t.topic,
            partitions: t.partitions.map((x) => ({ partition: x.partition, offset: String(x.offset) })),
          })),
        })
      }
    } catch (e) {
      if (txn.isActive()) await txn.abort().catch(() => {})
      throw e
    }
    if (s.commit) await txn.commit()
    else await txn.abort()
    return s.commit ? 'committed' : 'aborted'
  }
}

async function runSteps(cmd) {
  const session = new Session(cmd)
  const results = []
  try {
    for (const step of cmd.steps) {
      const fn = session[step.op]
      if (typeof fn !== 'function' || step.op === 'constructor') {
        results.push({ error: { name: 'BadStep', message: `unknown op ${JSON.stringify(step.op)}` } })
        continue
      }
      try {
        results.push({ ok: (await fn.call(session, step)) ?? null })
      } catch (e) {
        results.push({ error: errorJson(e) })
      }
    }
  } finally {
    await session.close()
  }
  emit({ results })
}

async function runMember(cmd) {
  const m = cmd.member
  const kafka = new Session(cmd).kafka
  const consumer = kafka.consumer({
    groupId: m.groupId,
    sessionTimeout: m.sessionTimeout ?? 6000,
    rebalanceTimeout: m.rebalanceTimeout ?? 10000,
    heartbeatInterval: m.heartbeatInterval ?? 200,
    maxWaitTimeInMs: 200,
    allowAutoTopicCreation: false,
  })
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    const { memberId, leaderId, memberAssignment, groupProtocol } = e.payload
    emit({ event: 'assigned', memberId, leader: memberId === leaderId, groupProtocol, assignment: memberAssignment })
  })
  consumer.on(consumer.events.CRASH, (e) => emit({ event: 'crash', error: errorJson(e.payload.error) }))
  let stopping = null
  const stop = () => {
    stopping ??= consumer.disconnect().then(() => {
      emit({ event: 'stopped' })
      process.exit(0)
    })
    return stopping
  }
  const rl = createInterface({ input: process.stdin })
  rl.on('line', (line) => line.trim() === 'stop' && stop())
  rl.on('close', stop)
  await consumer.connect()
  await consumer.subscribe({ topics: m.topics, fromBeginning: m.fromBeginning ?? true })
  await consumer.run({
    eachMessage: async ({ topic, partition, message }) => {
      emit({ event: 'record', ...fromMessage(topic, partition, message) })
    },
  })
  emit({ event: 'ready' })
}

async function readCommand() {
  if (process.argv[2]) return JSON.parse(process.argv[2])
  const chunks = []
  for await (const c of process.stdin) chunks.push(c)
  return JSON.parse(Buffer.concat(chunks).toString('utf8'))
}

const cmd = await readCommand()
setTimeout(() => {
  process.stderr.write(`client.mjs: deadline of ${cmd.deadlineMs ?? 30000} ms passed\n`)
  process.exit(3)
}, cmd.deadlineMs ?? 30000).unref()
if (cmd.member) await runMember(cmd)
else await runSteps(cmd)
