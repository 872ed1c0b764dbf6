// Package quota enforces Kafka's client quotas: producer_byte_rate,
// consumer_byte_rate and request_percentage per (user, client-id) entity,
// plus the broker's cold-read budget (a per-client byte rate for fetch
// bytes served from the bucket, tier.ColdConfig.ClientBytesPerSecond, so
// one backfill cannot take all the bucket bandwidth of the cold reader).
//
// Quotas are answered as Kafka does since KIP-219: the response is sent at
// once with throttle_time_ms set, and the connection reads no more of that
// client's requests for that long; clients also wait on their side. This
// package computes the throttle; the broker's connection applies it.
//
// # Pieces
//
//   - entity.go: the entities (KIP-55, KIP-546) and Kafka's precedence,
//     which picks the quota that applies to a request and the sensor it is
//     measured on. A Snapshot is the immutable set of configured quotas.
//   - rate.go: the rate math, pure (no clock, no locks).
//   - manager.go: Manager, the broker's quota state: the current Snapshot,
//     the sensors (one rate per SensorKey) and the millisecond clock.
//   - store.go: the loader, which keeps the Snapshot equal to etcd's
//     quotas/ keys through the Store interface (metadata.Store satisfies
//     it).
//   - admin.go: parsing and validating the DescribeClientQuotas filter and
//     AlterClientQuotas entries, and building described entries.
//
// # What counts
//
// Produce: the record-batch bytes of the request (ProduceBytes). Fetch: the
// record bytes of the response (FetchBytes); follower fetches are exempt,
// as Kafka exempts replication from client quotas. request_percentage: the
// handler's time as a percentage of one thread, for APIs that do not wait
// in the handler (the broker's API table marks them: Produce, Fetch, JoinGroup and SyncGroup
// park there as in Kafka's purgatories, which Kafka does not count either).
//
// # Invariants
//
//   - The Snapshot is replaced whole (an atomic pointer), never modified:
//     a request resolves its quota against one consistent view.
//   - At most maxSensors rates are tracked at once (client ids come from
//     the network); idle sensors are swept first, and past the bound a new
//     client is not measured (fail open rather than grow without limit).
//   - A throttle never exceeds maxThrottleMs (11 s): by then every sample that
//     led to it is obsolete.
//
// Lock order: Manager.mu is a leaf; nothing else is locked under it.
package quota
