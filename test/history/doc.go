// Package history checks produce/consume histories recorded while a cluster
// is being broken (test/cluster): which records the producers tried to write
// and what they were told, which records consumers saw, and what a final full
// read of each partition holds.
//
// Recording (History, safe for concurrent use):
//
//   - Produce(producer, value, key, partition): an attempt, before it is
//     sent. Every attempt carries a value unique in the history; the order of
//     Produce calls of one producer is its send order.
//   - Ack(value, partition, offset) / Fail(value) / Unknown(value): the
//     outcome. Fail means the write certainly did not happen; any error after
//     which the record may still have been written (a timeout, a retried
//     error) is Unknown. An attempt without an outcome counts as Unknown.
//   - Observe(session, partition, offset, value): a consumer saw a record.
//     A session is one consumer's uninterrupted run (no seek, no
//     rebalance); observations of a session are recorded in poll order.
//   - Final(partition, logStart, records): a complete read of the partition
//     from logStart to its end after the faults stopped. A partition never
//     given a final read is treated as empty from offset 0.
//   - ProduceTxn(producer, txn, value, key, partition) and EndTxn(txn,
//     outcome): an attempt inside a transaction, and the transaction's
//     outcome: TxnCommitted (EndTxn commit succeeded), TxnAborted (no commit
//     was ever asked for: an abort, or the producer died or was fenced with
//     it open) or TxnUnknown (a commit was asked for and not confirmed). An
//     acknowledged transactional attempt counts as acknowledged for the
//     rules below only if its transaction committed. Every read recorded in
//     a history with transactions must be a read_committed read.
//   - ObserveGroup(group, session, partition, offset, value): Observe by a
//     member of a consumer group; a member's session for a partition starts
//     at each assignment of the partition (the member seeks to the committed
//     offset there).
//   - CommitRead / CommitAcked / FinalCommit(group, partition, offset): a
//     group's committed offset as read while it runs (one reader per group,
//     readings in order), as acknowledged to a member's OffsetCommit, and as
//     read once every member stopped.
//
// Check is pure: it reads the recorded history and returns a Report. The
// anomalies (Kind) it looks for:
//
//   - lost-write: an acknowledged record, or a record some consumer saw, at
//     an offset >= the final read's log start that the final read lacks.
//   - duplicate: one value at two offsets (over all reads of the log).
//   - inconsistent-offsets: one (partition, offset) with two values, over
//     acks, consumer observations and the final read; also an ack whose
//     value the final read holds at another offset.
//   - nonmonotonic-poll: within a session the offsets of a partition do not
//     strictly increase.
//   - poll-skip: within a session a partition's offsets jump from a to b
//     while the final read holds a record strictly between them.
//   - reorder: two acknowledged records of one producer and partition whose
//     offsets are in the opposite order of their Produce calls (what an
//     idempotent producer promises).
//   - phantom-write: a record read that no attempt produced, or whose attempt
//     was recorded as failed.
//   - aborted-read: a record of an aborted transaction was read.
//   - torn-transaction: a transaction with an unconfirmed commit has some of
//     its records in the final read and others not (a committed one missing
//     a record is a lost-write; an aborted one showing one an aborted-read).
//   - offset-regression: a group's committed offset of a partition read
//     lower than an earlier reading, or finally below a commit a member was
//     told succeeded.
//   - group-missed: a record of the final read below a group's final
//     committed offset that no member of the group observed (consumer groups
//     read at least once).
package history
