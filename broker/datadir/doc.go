// Package datadir is the layout of a broker's data directory: where each
// local partition's log lives and how a directory is tied to the topic it
// belongs to. It knows nothing of logs, replicas or metadata beyond topic
// ids, and does not import package broker.
//
// # Layout
//
//	<data dir>/
//	  .lock                     flock(2)-held by the broker using the directory;
//	                            holds its pid (Acquire)
//	  <topic>-<partition>/      one per local partition (Layout.PartitionDir)
//	    partition.metadata      the topic id the directory belongs to
//	    ...                     the partition's hotlog files (hotlog/doc.go)
//	  ...                       anything else (the embedded etcd, the
//	                            cleaner's spool files) is never touched here
//
// partition.metadata is Kafka's format:
//
//	version: 0
//	topic_id: <topic id, base64 URL encoding without padding>
//
// It is written to a temporary file and renamed into place, so a crash
// leaves either no file or a whole one.
//
// # Invariants
//
//   - A directory is served only for the topic id its partition.metadata
//     names: Claim empties a directory left by an older topic of the same
//     name before the new topic's log opens in it, so a deleted topic's
//     records never reappear under a re-created name.
//   - RemoveStray deletes only directories named <valid topic>-<partition>
//     that hold a partition.metadata; any other entry is not its to judge.
package datadir
