// kafkajs against a Strata broker, as its users drive it. Run by
// test/e2e/client_kafkajs_test.go: node check.js HOST:PORT. Prints one line
// per step and exits non-zero at the first failure.
//
// Steps: admin (create, list, describe, alter configs, add partitions,
// offsets, delete records, groups, delete); produce and consume with keys,
// headers and both codecs kafkajs has built in (none, gzip: snappy, lz4 and
// zstd need third-party codec packages); an idempotent producer; a
// transaction aborted and one committed, read with read_committed; a
// consumer group through a rebalance.
'use strict';

const { Kafka, CompressionTypes, logLevel } = require('kafkajs');

const broker = process.argv[2];
const kafka = new Kafka({
  clientId: 'strata-e2e-kafkajs',
  brokers: [broker],
  logLevel: logLevel.ERROR,
  retry: { retries: 10, initialRetryTime: 200 },
  connectionTimeout: 10000,
  requestTimeout: 30000,
});

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
}

function step(name) {
  console.log('step ' + name);
}

async function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error('timed out: ' + what)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// consumeN runs a consumer of group on topic until n messages arrived.
async function consumeN(topic, group, n, opts = {}) {
  const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 200, ...opts });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      got.push({ partition, key: message.key && message.key.toString(), value: message.value.toString(),
        headers: message.headers, offset: message.offset });
      if (got.length >= n) done();
    },
  });
  try {
    await withTimeout(finished, 60000, `${n} messages of ${topic}`);
  } finally {
    await consumer.disconnect();
  }
  return got;
}

async function admin() {
  step('admin');
  const adm = kafka.admin();
  await adm.connect();
  check(await adm.createTopics({
    waitForLeaders: true,
    topics: [
      { topic: 'kjs-admin', numPartitions: 2, configEntries: [{ name: 'retention.ms', value: '3600000' }] },
      { topic: 'kjs-codecs', numPartitions: 1 },
      { topic: 'kjs-txn', numPartitions: 1 },
      { topic: 'kjs-group', numPartitions: 4 },
    ],
  }), 'createTopics created the topics');
  const topics = await adm.listTopics();
  check(topics.includes('kjs-admin') && topics.includes('kjs-group'), 'listTopics: ' + topics);
  await adm.createPartitions({ topicPartitions: [{ topic: 'kjs-admin', count: 3 }] });
  const md = await adm.fetchTopicMetadata({ topics: ['kjs-admin'] });
  check(md.topics[0].partitions.length === 3, 'fetchTopicMetadata: 3 partitions');
  await adm.alterConfigs({ resources: [{ type: 2, name: 'kjs-admin', configEntries: [{ name: 'retention.ms', value: '7200000' }] }] });
  const cfg = await adm.describeConfigs({ includeSynonyms: false, resources: [{ type: 2, name: 'kjs-admin', configNames: ['retention.ms'] }] });
  check(cfg.resources[0].configEntries[0].configValue === '7200000', 'describeConfigs after alterConfigs');
  const cluster = await adm.describeCluster();
  check(cluster.brokers.length === 1 && cluster.controller !== null, 'describeCluster');
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic: 'kjs-admin', messages: Array.from({ length: 10 }, (_, i) => ({ partition: 0, value: 'r' + i })) });
  await producer.disconnect();
  let offsets = await adm.fetchTopicOffsets('kjs-admin');
  check(offsets.find((o) => o.partition === 0).high === '10', 'fetchTopicOffsets high 10');
  await adm.deleteTopicRecords({ topic: 'kjs-admin', partitions: [{ partition: 0, offset: '4' }] });
  offsets = await adm.fetchTopicOffsets('kjs-admin');
  check(offsets.find((o) => o.partition === 0).low === '4', 'deleteTopicRecords moved the low offset to 4');
  await adm.listGroups();
  await adm.deleteTopics({ topics: ['kjs-admin'] });
  await adm.disconnect();
}

async function codecs() {
  step('codecs');
  const producer = kafka.producer();
  await producer.connect();
  const codecList = [['none', CompressionTypes.None], ['gzip', CompressionTypes.GZIP]];
  for (const [name, codec] of codecList) {
    await producer.send({
      topic: 'kjs-codecs', compression: codec, acks: -1,
      messages: Array.from({ length: 20 }, (_, i) => ({ key: 'k-' + i, value: `${name}-${i}`, headers: { h: name } })),
    });
  }
  await producer.disconnect();
  const got = await consumeN('kjs-codecs', 'kjs-codecs-g', 40);
  got.sort((a, b) => Number(a.offset) - Number(b.offset));
  got.forEach((m, i) => {
    const name = codecList[Math.floor(i / 20)][0];
    const n = i % 20;
    check(m.offset === String(i) && m.key === 'k-' + n && m.value === `${name}-${n}` && m.headers.h.toString() === name,
      `message ${i}: ${JSON.stringify(m)}`);
  });
}

async function idempotentAndTransactions() {
  step('idempotent');
  const idem = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await idem.connect();
  const res = await idem.send({ topic: 'kjs-txn', acks: -1, messages: Array.from({ length: 10 }, (_, i) => ({ value: 'idem-' + i })) });
  check(res[0].baseOffset === '0', 'idempotent base offset 0');
  await idem.disconnect();

  step('transactions');
  const tx = kafka.producer({ transactionalId: 'kjs-tx', idempotent: true, maxInFlightRequests: 1 });
  await tx.connect();
  for (const commit of [false, true]) {
    const t = await tx.transaction();
    const prefix = commit ? 'committed' : 'aborted';
    await t.send({ topic: 'kjs-txn', messages: Array.from({ length: 5 }, (_, i) => ({ value: `${prefix}-${i}` })) });
    if (commit) await t.commit(); else await t.abort();
  }
  await tx.disconnect();
  // kafkajs reads read_committed by default (readUncommitted: false).
  const got = await consumeN('kjs-txn', 'kjs-txn-g', 15);
  const values = got.map((m) => m.value);
  const want = [...Array.from({ length: 10 }, (_, i) => 'idem-' + i), ...Array.from({ length: 5 }, (_, i) => 'committed-' + i)];
  check(JSON.stringify(values) === JSON.stringify(want), 'read_committed saw ' + values);
}

async function groupRebalance() {
  step('group');
  const producer = kafka.producer();
  await producer.connect();
  const send = (prefix, n) => producer.send({
    topic: 'kjs-group', acks: -1,
    messages: Array.from({ length: n }, (_, i) => ({ partition: i % 4, value: `${prefix}-${i}` })),
  });
  await send('early', 100);
  const seen = new Map(); // value -> member ids
  const assigned = new Map(); // member id -> partitions of its last assignment
  const member = async (id) => {
    const c = kafka.consumer({ groupId: 'kjs-g', maxWaitTimeInMs: 200, sessionTimeout: 10000, rebalanceTimeout: 10000, heartbeatInterval: 500 });
    c.on(c.events.GROUP_JOIN, (e) => { assigned.set(id, e.payload.memberAssignment['kjs-group'] || []); });
    await c.connect();
    await c.subscribe({ topic: 'kjs-group', fromBeginning: true });
    await c.run({
      eachMessage: async ({ message }) => {
        const v = message.value.toString();
        seen.set(v, [...(seen.get(v) || []), id]);
      },
    });
    return c;
  };
  const waitUntil = async (cond, what) => {
    const deadline = Date.now() + 60000;
    while (!cond()) {
      if (Date.now() > deadline) throw new Error('timed out: ' + what);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const c1 = await member(1);
  await waitUntil(() => seen.size === 100, 'member 1 reads the 100 early records');
  const c2 = await member(2);
  await waitUntil(() => (assigned.get(2) || []).length > 0 && (assigned.get(1) || []).length < 4, 'the group rebalances to two members');
  await send('late', 40);
  await waitUntil(() => seen.size === 140, 'the 40 late records read');
  await c1.disconnect();
  await c2.disconnect();
  await producer.disconnect();
  let bySecond = 0;
  for (const [v, ids] of seen) {
    if (v.startsWith('late')) check(ids.length === 1, `${v} read by ${ids}`);
    if (ids.includes(2)) bySecond++;
  }
  check(bySecond > 0, 'member 2 read nothing after the rebalance');
}

(async () => {
  await admin();
  await codecs();
  await idempotentAndTransactions();
  await groupRebalance();
  console.log('kafkajs: all steps passed');
})().catch((err) => {
  console.error('kafkajs: ' + (err && err.stack ? err.stack : err));
  process.exit(1);
});
