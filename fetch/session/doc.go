// Package session keeps Kafka's incremental fetch sessions (KIP-227): a
// consumer or follower that fetches many partitions sends them all once,
// then only what changed, and the broker answers only the partitions with
// something new.
//
// The package knows nothing about the wire or the logs. The broker turns a
// Fetch request into a [Request] (session id and epoch, the partitions it
// names, the ones it forgets), calls [Cache.Begin], fetches the partitions
// of the returned [Context], and reports what it found per partition to
// [Context.Finish], which says which partitions the answer carries and which
// session id it names.
//
// # Request kinds (FetchMetadata in Kafka)
//
//	epoch -1 (FINAL)  sessionless full fetch: serve exactly the partitions
//	                  named; a session named by the id is closed; the answer
//	                  names session 0. Versions below 7 are always this.
//	epoch 0 (INITIAL) full fetch: serve the partitions named, close the
//	                  session the id names (if any), and open a new one
//	                  holding them if the cache admits it (else session 0:
//	                  the client keeps sending full fetches).
//	epoch > 0         incremental fetch of session id: unknown id is
//	                  FETCH_SESSION_ID_NOT_FOUND, an epoch other than the
//	                  session's next one INVALID_FETCH_SESSION_EPOCH. The
//	                  named partitions are added or their parameters
//	                  replaced, the forgotten ones removed, and every
//	                  partition of the session is fetched.
//
// An incremental answer carries a partition only if it has records or an
// error, or its high watermark, last stable offset or log start differs
// from what the session last sent for it (Kafka's
// CachedPartition.maybeUpdateResponseData); after an error the partition is
// sent again once the error clears. A full fetch's answer carries every
// partition and records those values.
//
// # The cache (FetchSessionCache in Kafka)
//
// At most Config.Slots sessions (max.incremental.fetch.session.cache.slots,
// default 1000) holding at most Config.MaxPartitions partitions between them
// (default 200,000, about 20 MB): a session whose incremental fetch would
// pass that bound is closed (FETCH_SESSION_ID_NOT_FOUND; the client goes
// back to full fetches), and a full fetch naming more than the bound is
// served without a session. A new session takes a free slot and room;
// otherwise it may evict, as Kafka does:
//
//  1. a stale session: one not used for Config.EvictAfter (120 s);
//  2. else the lowest-ranked session that has existed for EvictAfter, if
//     the new one ranks higher. Ranking is (privileged, partition count):
//     a follower's session (privileged) outranks any consumer's, and only a
//     privileged session may evict a privileged one.
//
// If nothing may be evicted, the full fetch is served without a session.
//
// # Concurrency
//
// One mutex guards the cache and every session in it. Begin checks and
// advances a session's epoch under it, so two requests racing on one
// session cannot both proceed: the second sees a stale epoch. Finish takes
// it again to record the values sent.
package session
