// Package cluster runs Strata clusters as separate processes on loopback for
// the multi-broker acceptance tests (issue 5): one real etcd process, MinIO
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
// Restart (same flags and data dir), Wipe (delete the data dir while down).
// Every wait is bounded; every process dies at t.Cleanup (and with the test
// binary, through Pdeathsig). When a test fails, each broker's log tail is
// printed and the full logs are copied to $STRATA_TEST_LOG_DIR (default
// <tmp>/strata-cluster-logs/<test>).
//
// The binary under test is $STRATA_BIN, else cmd/strata built once per test
// process (Main). A missing etcd, MinIO or kcat skips a test, or fails it
// when CI=true.
//
// Workload drives an idempotent acks=all producer and consumers while faults
// happen and records everything in a history.History; its Finish does the
// final read and returns the checker's report.
//
// Run: go test -timeout 900s ./test/cluster/ (one test at a time with -run).
package cluster
