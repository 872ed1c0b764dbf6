package e2e

// Issue 9 authorization against the real binary: SASL_SSL with SCRAM and
// the authorizer on. Users and ACLs are managed with `strata user` and
// `strata acl` as the super user; a client allowed to produce but not
// consume can do exactly that, a client without ACLs gets
// TOPIC_AUTHORIZATION_FAILED, and an authenticated client posing as a
// follower (a raw Fetch with replica id 2) is refused.

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// runStrataInput runs a strata client command with stdin and returns its
// stdout.
func runStrataInput(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("strata %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// rawFetch sends one Fetch of partition 0 of topic straight to the seed
// broker as replicaID (-1: a consumer) and returns the partition's code.
// cl must be capped at Fetch v12 (Kafka 3.0 versions), the last that
// addresses topics by name: a client without Describe cannot learn the
// topic id.
func rawFetch(t *testing.T, cl *kgo.Client, topic string, replicaID int32) int16 {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.ReplicaState.ID = replicaID, replicaID // before and after v15
	req.MaxBytes, req.MaxWaitMillis = 1<<20, 100
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.SeedBrokers()[0].Request(testCtx(t, 30*time.Second), req)
	if err != nil {
		t.Fatalf("fetch as replica %d: %v", replicaID, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func TestACLsOverSASLSSL(t *testing.T) {
	env := newSecureEnv(t)
	b := StartBroker(t, withListeners(Listener{Name: "SASL_SSL", Protocol: "SASL_SSL"}),
		withArgs(append(env.saslArgs(), "--authorizer", "--super-users", "User:broker")...))
	admin := func(args ...string) []string {
		return append(args, "--brokers", b.Addr, "--tls-ca-file", env.files.CA, "--sasl-mechanism", "SCRAM-SHA-512",
			"--sasl-username", "broker", "--sasl-password-file", env.passFile)
	}
	newClient := func(user, pass string, opts ...kgo.Opt) *kgo.Client {
		base := []kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.MaxVersions(kversion.V3_0_0())}
		cl, err := kgo.NewClient(append(append(base, env.scramOpts(user, pass)...), opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	const topic = "acl-events"
	if resp, err := kadm.NewClient(newClient("broker", secureUsers["broker"])).CreateTopic(testCtx(t, 60*time.Second), 1, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	// bob's password goes through stdin, never argv.
	runStrataInput(t, "bob-secret\n", admin("user", "create", "bob", "--mechanism", "SCRAM-SHA-512")...)
	if out := runStrata(t, admin("user", "list")...); !strings.Contains(out, "bob") || strings.Contains(out, "bob-secret") {
		t.Fatalf("user list:\n%s", out)
	}
	runStrata(t, admin("acl", "create", "--allow-principal", "User:alice", "--operation", "write", "--topic", topic)...)
	if out := runStrata(t, admin("acl", "list", "--topic", topic)...); !strings.Contains(out, "User:alice") || !strings.Contains(out, "WRITE") {
		t.Fatalf("acl list:\n%s", out)
	}

	t.Run("produce but not consume", func(t *testing.T) {
		alice := newClient("alice", secureUsers["alice"], kgo.DefaultProduceTopic(topic))
		ctx := testCtx(t, 60*time.Second)
		if err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("one")}, &kgo.Record{Value: []byte("two")}).FirstErr(); err != nil {
			t.Fatalf("alice (Write) produce: %v", err)
		}
		if code := rawFetch(t, alice, topic, -1); code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("alice (no Read) fetch: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}
		consumer := newClient("alice", secureUsers["alice"], kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		var fetchErr error
		for fetchErr == nil && ctx.Err() == nil {
			fetches := consumer.PollFetches(ctx)
			if fetches.NumRecords() > 0 {
				t.Fatal("alice consumed records without Read")
			}
			fetches.EachError(func(_ string, _ int32, err error) { fetchErr = err })
		}
		if !errors.Is(fetchErr, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice's consumer: %v, want TOPIC_AUTHORIZATION_FAILED", fetchErr)
		}
	})

	t.Run("unauthorized client", func(t *testing.T) {
		bob := newClient("bob", "bob-secret", kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite(),
			kgo.RecordRetries(1))
		err := bob.ProduceSync(testCtx(t, 60*time.Second), &kgo.Record{Value: []byte("bob")}).FirstErr()
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("bob produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		if code := rawFetch(t, bob, topic, -1); code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("bob fetch: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}
	})

	t.Run("pretend follower", func(t *testing.T) {
		runStrata(t, admin("acl", "create", "--allow-principal", "User:bob", "--operation", "read", "--topic", topic)...)
		bob := newClient("bob", "bob-secret")
		if code := rawFetch(t, bob, topic, -1); code != 0 {
			t.Fatalf("bob (Read) consumer fetch: %v", kerr.ErrorForCode(code))
		}
		if code := rawFetch(t, bob, topic, 2); code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("bob's fetch as replica 2: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}
		out := runStrata(t, admin("acl", "delete", "--allow-principal", "User:bob", "--topic", topic)...)
		if !strings.Contains(out, "deleted") {
			t.Fatalf("acl delete:\n%s", out)
		}
		if code := rawFetch(t, bob, topic, -1); code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("bob fetch after the ACL's deletion: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}
	})

	// A diskless topic is authorized as a classic one: any broker serves
	// it, but only after the same checks.
	t.Run("diskless topic", func(t *testing.T) {
		const diskless = "acl-diskless"
		cfg := map[string]*string{"diskless.enable": kadm.StringPtr("true")}
		if resp, err := kadm.NewClient(newClient("broker", secureUsers["broker"])).CreateTopic(testCtx(t, 60*time.Second), 1, 1, cfg, diskless); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", diskless, err, resp.Err)
		}
		runStrata(t, admin("acl", "create", "--allow-principal", "User:alice", "--operation", "write", "--topic", diskless)...)
		alice := newClient("alice", secureUsers["alice"], kgo.DefaultProduceTopic(diskless))
		if err := alice.ProduceSync(testCtx(t, 60*time.Second), &kgo.Record{Value: []byte("one")}).FirstErr(); err != nil {
			t.Fatalf("alice (Write) produce to the diskless topic: %v", err)
		}
		if code := rawFetch(t, alice, diskless, -1); code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("alice (no Read) fetch of the diskless topic: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}
		bob := newClient("bob", "bob-secret", kgo.DefaultProduceTopic(diskless), kgo.DisableIdempotentWrite(), kgo.RecordRetries(1))
		if err := bob.ProduceSync(testCtx(t, 60*time.Second), &kgo.Record{Value: []byte("bob")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("bob produce to the diskless topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		runStrata(t, admin("acl", "create", "--allow-principal", "User:bob", "--operation", "read", "--topic", diskless)...)
		if code := rawFetch(t, bob, diskless, -1); code != 0 {
			t.Fatalf("bob (Read) fetch of the diskless topic: %v", kerr.ErrorForCode(code))
		}
	})

	t.Run("user delete", func(t *testing.T) {
		runStrata(t, admin("user", "delete", "bob")...)
		if out := runStrata(t, admin("user", "list")...); strings.Contains(out, "bob") {
			t.Fatalf("bob still listed after user delete:\n%s", out)
		}
		if err := probeMetadata(t, b.Addr, env.scramOpts("bob", "bob-secret")...); err == nil {
			t.Fatal("bob authenticated after his credentials were deleted")
		}
	})
}

// waitTopicVisible polls each broker as the client until a Metadata
// request for topic is no longer TOPIC_AUTHORIZATION_FAILED there: every
// broker's ACL snapshot has caught up with the ACLs just created.
func waitTopicVisible(t *testing.T, addrs []string, topic string, opts ...kgo.Opt) {
	t.Helper()
	for _, addr := range addrs {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(testCtx(t, 10*time.Second), cl)
			if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: topic %s still not visible after 30s: %v", addr, topic, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cl.Close()
	}
}

// TestACLsReplicateAsBrokers: with the authorizer on, brokers replicate as
// their super-user principal (follower fetches need ClusterAction), and a
// client with an ACL on one topic creates, produces with acks=all and
// consumes it through the three brokers.
func TestACLsReplicateAsBrokers(t *testing.T) {
	env := newSecureEnv(t)
	common := append(env.saslArgs(), "--authorizer", "--super-users", "User:broker", "--durability", "replication",
		"--offsets-topic-replication-factor", "3")
	etcd := clusterEtcd(t)
	listener := Listener{Name: "SASL_SSL", Protocol: "SASL_SSL"}
	b1 := StartBroker(t, withListeners(listener), withArgs(common...), withEtcd(etcd))
	brokers := []*Broker{b1}
	for id := 2; id <= 3; id++ {
		brokers = append(brokers, StartBroker(t, withListeners(listener), withArgs(common...), withEtcd(etcd),
			func(b *Broker) { b.NodeID, b.Cluster = id, b1.Cluster }))
	}
	var seeds []string
	for _, b := range brokers {
		seeds = append(seeds, b.Addr)
	}
	const topic = "replicated-acl"
	runStrata(t, "acl", "create", "--allow-principal", "User:alice", "--operation", "all", "--topic", topic,
		"--brokers", b1.Addr, "--tls-ca-file", env.files.CA, "--sasl-mechanism", "SCRAM-SHA-512",
		"--sasl-username", "broker", "--sasl-password-file", env.passFile)
	aliceOpts := append(env.scramOpts("alice", secureUsers["alice"]), kgo.SeedBrokers(seeds...))
	waitTopicVisible(t, seeds, topic, env.scramOpts("alice", secureUsers["alice"])...)
	newClient := func(opts ...kgo.Opt) *kgo.Client { return b1.Client(append(aliceOpts, opts...)...) }
	waitBrokers(t, newClient, 3)
	produceConsume(t, newClient, topic, 3, 100)
	waitFullISR(t, newClient, topic)
}
