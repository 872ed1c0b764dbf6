// Package cluster runs Strata clusters as separate processes on loopback for
// the multi-broker acceptance tests: one real etcd process, MinIO
// when asked, and N strata brokers, each a child process of the test binary.
//
// Every broker talks to etcd and to its peers through TCP proxies the harness
// owns, so a test can cut one broker off the cluster while clients still
// reach it directly:
//
//	broker i --etcd-->  proxy E(i)   --> etcd
//	broker i --peer j--> proxy L(i,j) --> broker j's listener
//	clients  ------------------------> broker i's listener (never proxied)
//
// Cut(i) blackholes E(i), L(i,*) and L(*,i): open connections are closed
// and new ones are accepted and then held without a byte forwarded until
// Heal(i), which closes them so that the clients reconnect. Ports (Kafka,
// HTTP, proxies) are chosen once at Start, so a restarted broker keeps its
// addresses; Config.Spare reserves slots for AddBroker, whose addresses and
// proxies are in every broker's --peer-address from the start.
//
// Faults: Kill (SIGKILL), Stop/Cont (SIGSTOP/SIGCONT), Shutdown (SIGTERM),
// Restart (same flags and data dir), Wipe (delete the data dir while down);
// KillEtcd/RestartEtcd and KillMinIO/RestartMinIO kill the services with
// SIGKILL and start them again on the same data dir and port, so the brokers
// reconnect (etcd's ports come from the same fixed range as the brokers';
// MinIO's port is held bound, not listening, while it is down); CutEtcd/
// HealEtcd blackhole every broker's etcd proxy with etcd up, and
// CompactEtcd compacts etcd's history (a watcher cut off meanwhile must
// reload).
// Every wait is bounded; every process dies at t.Cleanup (and with the test
// binary, through Pdeathsig). When a test fails, each broker's log tail is
// printed and the full logs are copied to $STRATA_TEST_LOG_DIR (default
// <tmp>/strata-cluster-logs/<test>).
//
// The binary under test is $STRATA_BIN, else cmd/strata built once per test
// process (testkit.StrataBinary; TestMain uses testkit.Main to remove it). A
// missing etcd, MinIO or kcat skips a test, or fails it when CI=true.
//
// Workload drives an idempotent acks=all producer and consumers while faults
// happen and records everything in a history.History; its Finish does the
// final read and returns the checker's report. TestDisklessFault* run it on
// a diskless topic, with a producer and a reader in every zone, through a
// broker kill, a MinIO outage and etcd outages.
//
// Run: go test -timeout 900s ./test/cluster/ (one test at a time with -run).
//
// # Soak mode
//
// TestSoak runs only when STRATA_SOAK is set to a duration (it skips
// otherwise, in CI too):
//
//	STRATA_SOAK=30m go test -count=1 -run 'TestSoak$' -v -timeout 45m ./test/cluster/
//
// (-timeout must leave 15 minutes beyond the duration for setup and the
// finish.) Three brokers with MinIO and small segments (so tiering runs all
// along) carry a mixed workload, while random faults hit the cluster one at
// a time, at least every 10 s: SIGKILL and restart, SIGSTOP/SIGCONT and Cut/
// Heal of a broker (at most one broker out at a time: RF 3 and
// min.insync.replicas 2 keep the cluster writable), SIGKILL and restart of
// etcd and of MinIO, each held 1-4 s. The schedule (kinds, targets, holds,
// gaps), the transactions' decisions and the groups' member changes come
// from a seed, logged at the start; STRATA_SOAK_SEED=<n> replays them (the
// cluster's timing differs).
//
// The workload, and what is checked (test/history):
//
//   - two idempotent acks=all producers and a reader of every partition on
//     one topic: no acknowledged record lost, none duplicated, each
//     producer's records in order per partition, no reader skipping records
//     or going backwards;
//   - two consumer groups on that topic, one of the classic protocol and one
//     of KIP-848's consumer protocol (kgo.ServerSideBalancer), committing
//     after every poll, each replacing a member every 10-25 s so that
//     partitions change hands: committed offsets never go back (neither
//     between two readings nor below an acknowledged commit), and each group
//     reads every record below its final committed offset at least once,
//     after which the final commits must reach every partition's end;
//   - two transactional producers on a second topic, committing most
//     transactions, aborting some and abandoning some open (a new session
//     fences them): a read_committed reader and a final read_committed read
//     never show an aborted record, show every committed one exactly once,
//     and show a transaction whose commit was unconfirmed whole or not at
//     all.
//
// At the end it logs the faults by kind, the leader elections seen (leader
// epoch rises of the data and coordinator partitions, from metadata polled
// every 250 ms), the records acknowledged (idempotent, and in committed
// transactions), per-component statistics, and one line starting with
// "soak summary:"; any anomaly fails the test.
package cluster
