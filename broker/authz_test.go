package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/metadata/metadatatest"
)

const testSuperUser = "User:admin"

// authzBroker starts a broker with the authorizer on and testSuperUser as
// its super user (plus extra super users).
func authzBroker(t *testing.T, superUsers ...string) *testBroker {
	t.Helper()
	return startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		c.Authorizer = true
		c.SuperUsers = append([]string{testSuperUser}, superUsers...)
	})
}

// as sends req to b's handler as principal (from 127.0.0.1), at the
// highest version b serves, as the connection would after decoding.
func as(t *testing.T, b *Broker, principal string, req kmsg.Request) kmsg.Response {
	t.Helper()
	entry, ok := b.apis[req.Key()]
	if !ok {
		t.Fatalf("api key %d not served", req.Key())
	}
	if req.GetVersion() == 0 {
		req.SetVersion(entry.spec.maxVersion)
	}
	rc := &requestContext{principal: principal, host: "127.0.0.1", apiKey: req.Key(), version: req.GetVersion()}
	resp, err := entry.handle(testCtx(t), rc, req)
	if err != nil {
		t.Fatalf("api key %d as %s: %v", req.Key(), principal, err)
	}
	return resp
}

// allow stores ACLs allowing principal ops on a literal topic, from any
// host, and waits until b's snapshot has them (the etcd watch).
func allowTopic(t *testing.T, tb *testBroker, principal, topic string, ops ...auth.Operation) {
	t.Helper()
	var acls []auth.ACL
	for _, op := range ops {
		acls = append(acls, auth.ACL{ResourceType: auth.ResourceTopic, ResourceName: topic, PatternType: auth.PatternLiteral,
			Principal: principal, Host: "*", Operation: op, Permission: auth.PermissionAllow})
	}
	if err := tb.store.CreateACLs(testCtx(t), acls); err != nil {
		t.Fatal(err)
	}
	waitACLs(t, tb.b, func(have []auth.ACL) bool {
		return !slices.ContainsFunc(acls, func(a auth.ACL) bool { return !slices.Contains(have, a) })
	})
}

// waitACLs waits until b's snapshot satisfies ok.
func waitACLs(t *testing.T, b *Broker, ok func([]auth.ACL) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok(b.authz.Snapshot().ACLs()) {
		if time.Now().After(deadline) {
			t.Fatalf("ACL snapshot not updated by the watch after 20s: %v", b.authz.Snapshot().ACLs())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// createTopicAs creates a one-partition topic as the super user.
func createTopicAs(t *testing.T, tb *testBroker, name string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
	req.Topics = append(req.Topics, rt)
	resp := as(t, tb.b, testSuperUser, req).(*kmsg.CreateTopicsResponse)
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create %s: %v", name, kerr.ErrorForCode(code))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if p, code := tb.b.parts.lookup(name, 0); code == 0 && p.isLeader() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not led after 20s", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func produceAs(t *testing.T, b *Broker, principal, topic string) int16 {
	t.Helper()
	req := newProduceReq(topic, -1, 10000, buildBatch(batchSpec{records: 2, valueSize: 8, timestamp: time.Now().UnixMilli()}))
	resp := as(t, b, principal, req).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

func fetchAs(t *testing.T, b *Broker, principal, topic string, replicaID int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := newFetchReq(topic, [16]byte{}, 0, 0, 0)
	req.Version, req.ReplicaID = 12, replicaID // by name; ReplicaID is top-level before v15
	resp := as(t, b, principal, req).(*kmsg.FetchResponse)
	return resp.Topics[0].Partitions[0]
}

// TestAuthorizerOffAllowsEverything: without the authorizer (the default)
// an anonymous client may do anything, with no ACL stored.
func TestAuthorizerOffAllowsEverything(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), nil)
	createTopicAs(t, tb, "open")
	if code := produceAs(t, tb.b, anonymousPrincipal, "open"); code != 0 {
		t.Fatalf("anonymous produce with the authorizer off: %v", kerr.ErrorForCode(code))
	}
	if sp := fetchAs(t, tb.b, anonymousPrincipal, "open", -1); sp.ErrorCode != 0 || countRecords(t, sp.RecordBatches) != 2 {
		t.Fatalf("anonymous fetch with the authorizer off: %v, %d records", kerr.ErrorForCode(sp.ErrorCode), countRecords(t, sp.RecordBatches))
	}
	if !tb.b.authz.allowed(&requestContext{principal: "User:nobody"}, auth.OpAlter, auth.ResourceCluster, auth.ClusterResourceName) {
		t.Fatal("authorized is false with the authorizer off")
	}
}

// TestAuthorizerOnDeniesByDefault: with the authorizer on and no ACL, only
// the super user gets through.
func TestAuthorizerOnDeniesByDefault(t *testing.T) {
	tb := authzBroker(t)
	createTopicAs(t, tb, "closed")
	if code := produceAs(t, tb.b, anonymousPrincipal, "closed"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("anonymous produce: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := produceAs(t, tb.b, "User:alice", "closed"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice produce: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := produceAs(t, tb.b, testSuperUser, "closed"); code != 0 {
		t.Fatalf("super user produce: %v", kerr.ErrorForCode(code))
	}
	// Not leaking existence: a topic that does not exist is refused the same way.
	if code := produceAs(t, tb.b, "User:alice", "ghost"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("produce to a missing topic: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	desc := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	desc.Resources = append(desc.Resources, r)
	if code := as(t, tb.b, "User:alice", desc).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("broker configs: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
}

// TestAllowEveryoneIfNoACLFound: with allow.everyone.if.no.acl.found, a
// topic that no ACL names is open to anyone; once an ACL names it, only
// what the ACLs allow gets through.
func TestAllowEveryoneIfNoACLFound(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		c.Authorizer, c.AllowEveryoneIfNoACL, c.SuperUsers = true, true, []string{testSuperUser}
	})
	createTopicAs(t, tb, "unguarded")
	createTopicAs(t, tb, "guarded")
	if code := produceAs(t, tb.b, anonymousPrincipal, "unguarded"); code != 0 {
		t.Fatalf("anonymous produce to a topic without ACLs: %v", kerr.ErrorForCode(code))
	}
	allowTopic(t, tb, "User:alice", "guarded", auth.OpWrite)
	if code := produceAs(t, tb.b, "User:alice", "guarded"); code != 0 {
		t.Fatalf("alice produce with her ACL: %v", kerr.ErrorForCode(code))
	}
	if code := produceAs(t, tb.b, anonymousPrincipal, "guarded"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("anonymous produce to a topic with ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := produceAs(t, tb.b, anonymousPrincipal, "unguarded"); code != 0 {
		t.Fatalf("anonymous produce to the topic still without ACLs: %v", kerr.ErrorForCode(code))
	}
}

// TestProduceButNotConsume: a principal allowed to Write a topic, not to
// Read it, can produce and cannot fetch, commit offsets or join a group.
func TestProduceButNotConsume(t *testing.T) {
	tb := authzBroker(t)
	createTopicAs(t, tb, "events")
	allowTopic(t, tb, "User:alice", "events", auth.OpWrite)
	if code := produceAs(t, tb.b, "User:alice", "events"); code != 0 {
		t.Fatalf("alice produce: %v", kerr.ErrorForCode(code))
	}
	sp := fetchAs(t, tb.b, "User:alice", "events", -1)
	if sp.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(sp.RecordBatches) != 0 {
		t.Fatalf("alice fetch: %v with %d bytes, want TOPIC_AUTHORIZATION_FAILED and no data", kerr.ErrorForCode(sp.ErrorCode), len(sp.RecordBatches))
	}
	if sp := fetchAs(t, tb.b, testSuperUser, "events", -1); sp.ErrorCode != 0 || countRecords(t, sp.RecordBatches) != 2 {
		t.Fatalf("super user fetch: %v, %d records", kerr.ErrorForCode(sp.ErrorCode), countRecords(t, sp.RecordBatches))
	}
	// Idempotent producers: Write on a topic implies IdempotentWrite (KIP-679).
	pid := as(t, tb.b, "User:alice", kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if pid.ErrorCode != 0 || pid.ProducerID < 0 {
		t.Fatalf("alice InitProducerId: %v", kerr.ErrorForCode(pid.ErrorCode))
	}
	pid = as(t, tb.b, "User:bob", kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if pid.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("bob InitProducerId: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(pid.ErrorCode))
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis = "g", "consumer", 10000
	if code := as(t, tb.b, "User:alice", join).(*kmsg.JoinGroupResponse).ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("alice join: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
}

// TestProduceButNotConsumeOverTheWire: the same through a real connection,
// where the principal is the connection's (anonymous on PLAINTEXT) and a
// franz-go idempotent producer works end to end.
func TestProduceButNotConsumeOverTheWire(t *testing.T) {
	tb := authzBroker(t)
	createTopicAs(t, tb, "wire")
	allowTopic(t, tb, anonymousPrincipal, "wire", auth.OpWrite)
	cl := newDataClient(t, tb.b, kgo.DefaultProduceTopic("wire"))
	produceSyncAll(t, cl, []*kgo.Record{{Value: []byte("a")}, {Value: []byte("b")}})
	id, _ := tb.b.parts.topicID("wire")
	req := newFetchReq("wire", id, 0, 0, 0) // the client picks the version: by name or id
	req.ReplicaID = -1
	resp := requestDirect(t, cl, req).(*kmsg.FetchResponse)
	if sp := resp.Topics[0].Partitions[0]; sp.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("anonymous fetch: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp := fetchAs(t, tb.b, testSuperUser, "wire", -1); countRecords(t, sp.RecordBatches) != 2 {
		t.Fatalf("the produced records are not in the log: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
}

// TestMetadataHidesTopics: the full list omits topics the principal may
// not Describe; asking for one by name is TOPIC_AUTHORIZATION_FAILED, for
// missing topics too (no auto-creation without Create).
func TestMetadataHidesTopics(t *testing.T) {
	tb := authzBroker(t)
	createTopicAs(t, tb, "visible")
	createTopicAs(t, tb, "hidden")
	allowTopic(t, tb, "User:alice", "visible", auth.OpDescribe)
	names := func(resp *kmsg.MetadataResponse) map[string]int16 {
		out := map[string]int16{}
		for _, mt := range resp.Topics {
			out[derefStr(mt.Topic)] = mt.ErrorCode
		}
		return out
	}
	all := names(as(t, tb.b, "User:alice", kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse))
	if len(all) != 1 || all["visible"] != 0 {
		t.Fatalf("alice sees %v, want only visible", all)
	}
	if super := names(as(t, tb.b, testSuperUser, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)); len(super) < 2 {
		t.Fatalf("super user sees %v", super)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation, req.IncludeTopicAuthorizedOperations = true, true
	for _, name := range []string{"visible", "hidden", "ghost"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp := as(t, tb.b, "User:alice", req).(*kmsg.MetadataResponse)
	got := names(resp)
	if got["visible"] != 0 || got["hidden"] != kerr.TopicAuthorizationFailed.Code || got["ghost"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("named topics: %v", got)
	}
	if want := int32(1 << auth.OpDescribe); resp.Topics[0].AuthorizedOperations != want {
		t.Fatalf("authorized operations of visible: %b, want %b", resp.Topics[0].AuthorizedOperations, want)
	}
	if _, ok := tb.b.parts.topic("ghost"); ok {
		t.Fatal("ghost was auto-created without Create")
	}
}

// TestFollowerFetchNeedsClusterAction: a fetch with a replica id from a
// principal without ClusterAction is refused (even with Read on the topic)
// and moves no replica state; a broker principal with ClusterAction is a
// follower.
func TestFollowerFetchNeedsClusterAction(t *testing.T) {
	tb := authzBroker(t)
	createTopicAs(t, tb, "replicated")
	allowTopic(t, tb, "User:mallory", "replicated", auth.OpAll)
	if code := produceAs(t, tb.b, testSuperUser, "replicated"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	p, _ := tb.b.parts.lookup("replicated", 0)
	hw := p.highWatermark()
	sp := fetchAs(t, tb.b, "User:mallory", "replicated", 2)
	if sp.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(sp.RecordBatches) != 0 {
		t.Fatalf("follower fetch from mallory: %v with %d bytes, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(sp.ErrorCode), len(sp.RecordBatches))
	}
	if p.highWatermark() != hw {
		t.Fatalf("a refused follower fetch moved the HW from %d to %d", hw, p.highWatermark())
	}
	// Mallory may still consume: the refusal is of the replica role only.
	if sp := fetchAs(t, tb.b, "User:mallory", "replicated", -1); sp.ErrorCode != 0 || countRecords(t, sp.RecordBatches) != 2 {
		t.Fatalf("mallory consumer fetch: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	broker := auth.ACL{ResourceType: auth.ResourceCluster, ResourceName: auth.ClusterResourceName, PatternType: auth.PatternLiteral,
		Principal: "User:broker-2", Host: "*", Operation: auth.OpClusterAction, Permission: auth.PermissionAllow}
	if err := tb.store.CreateACLs(testCtx(t), []auth.ACL{broker}); err != nil {
		t.Fatal(err)
	}
	waitACLs(t, tb.b, func(have []auth.ACL) bool { return slices.Contains(have, broker) })
	if sp := fetchAs(t, tb.b, "User:broker-2", "replicated", 2); sp.ErrorCode == kerr.TopicAuthorizationFailed.Code {
		t.Fatal("a principal with ClusterAction was refused as a follower")
	}
}

// TestACLAdminRoundTrip: CreateAcls, DescribeAcls, DeleteAcls through kadm
// (as a super user over the wire), with this broker's snapshot following
// each change, and CLUSTER_AUTHORIZATION_FAILED for anyone else.
func TestACLAdminRoundTrip(t *testing.T) {
	tb := authzBroker(t, anonymousPrincipal) // the wire's principal administers
	adm, _ := adminClient(t, tb.b)
	ctx := testCtx(t)
	b := kadm.NewACLs().Topics("orders").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").Operations(kadm.OpRead, kadm.OpWrite)
	created, err := adm.CreateACLs(ctx, b)
	if err != nil || len(created) != 2 || created[0].Err != nil || created[1].Err != nil {
		t.Fatalf("create: %v %+v", err, created)
	}
	// This broker answers with its snapshot already reloaded.
	if !tb.b.authz.allowed(&requestContext{principal: "User:alice", host: "10.0.0.1"}, auth.OpRead, auth.ResourceTopic, "orders.eu") {
		t.Fatal("alice cannot read orders.eu right after CreateAcls")
	}
	list := kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny)
	described, err := adm.DescribeACLs(ctx, list)
	if err != nil || len(described) != 1 || described[0].Err != nil || len(described[0].Described) != 2 {
		t.Fatalf("describe: %v %+v", err, described)
	}
	for _, d := range described[0].Described {
		if d.Principal != "User:alice" || d.Name != "orders" || d.Pattern != kadm.ACLPatternPrefixed || d.Host != "*" {
			t.Fatalf("described %+v", d)
		}
	}
	// Another principal is refused every ACL API.
	if code := as(t, tb.b, "User:bob", kmsg.NewPtrDescribeACLsRequest()).(*kmsg.DescribeACLsResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("bob describe: %v", kerr.ErrorForCode(code))
	}
	create := kmsg.NewPtrCreateACLsRequest()
	create.Creations = append(create.Creations, kmsg.NewCreateACLsRequestCreation())
	if code := as(t, tb.b, "User:bob", create).(*kmsg.CreateACLsResponse).Results[0].ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("bob create: %v", kerr.ErrorForCode(code))
	}
	// An invalid ACL is INVALID_REQUEST (the cluster resource has one name).
	bad := kmsg.NewCreateACLsRequestCreation()
	bad.ResourceType, bad.ResourceName, bad.Principal, bad.Host = kmsg.ACLResourceTypeCluster, "other", "User:x", "*"
	bad.Operation, bad.PermissionType = kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow
	create.Creations = []kmsg.CreateACLsRequestCreation{bad}
	if code := as(t, tb.b, testSuperUser, create).(*kmsg.CreateACLsResponse).Results[0].ErrorCode; code != kerr.InvalidRequest.Code {
		t.Fatalf("invalid ACL: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics("orders").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").AllowHosts().Operations(kadm.OpRead))
	if err != nil || len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 1 {
		t.Fatalf("delete: %v %+v", err, deleted)
	}
	if tb.b.authz.allowed(&requestContext{principal: "User:alice"}, auth.OpRead, auth.ResourceTopic, "orders.eu") {
		t.Fatal("alice can still read after DeleteAcls")
	}
	if !tb.b.authz.allowed(&requestContext{principal: "User:alice"}, auth.OpWrite, auth.ResourceTopic, "orders.eu") {
		t.Fatal("the Write ACL went with the Read one")
	}
}

// TestSCRAMAdminRoundTrip: AlterUserScramCredentials and
// DescribeUserScramCredentials through kadm, with Kafka's per-user errors.
func TestSCRAMAdminRoundTrip(t *testing.T) {
	tb := authzBroker(t, anonymousPrincipal)
	adm, _ := adminClient(t, tb.b)
	ctx := testCtx(t)
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "secret"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "secret"},
	})
	if err != nil || !altered.Ok() {
		t.Fatalf("upsert: %v %+v", err, altered)
	}
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || len(described["alice"].CredInfos) != 2 {
		t.Fatalf("describe: %v %+v", err, described)
	}
	// The stored credential verifies the password (PLAIN recomputes it).
	lookup := func(user string) (auth.ScramCredential, bool, error) {
		return tb.store.ScramCredential(ctx, user, auth.MechScramSHA512)
	}
	if user, err := auth.VerifyPlain([]byte("\x00alice\x00secret"), lookup); err != nil || user != "alice" {
		t.Fatalf("verify the stored credential: %q %v", user, err)
	}
	// Kafka's per-user errors.
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	weak := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	weak.Name, weak.Mechanism, weak.Iterations, weak.Salt, weak.SaltedPassword = "bob", 2, 100, []byte("salt"), make([]byte, 64)
	missing := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	missing.Name, missing.Mechanism = "carol", 1
	unknown := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	unknown.Name, unknown.Mechanism = "dave", 7
	req.Upsertions, req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{weak},
		[]kmsg.AlterUserSCRAMCredentialsRequestDeletion{missing, unknown}
	codes := map[string]int16{}
	for _, r := range as(t, tb.b, testSuperUser, req).(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		codes[r.User] = r.ErrorCode
	}
	want := map[string]int16{"bob": kerr.UnacceptableCredential.Code, "carol": kerr.ResourceNotFound.Code,
		"dave": kerr.UnsupportedSaslMechanism.Code}
	for user, code := range want {
		if codes[user] != code {
			t.Errorf("%s: %v, want %v", user, kerr.ErrorForCode(codes[user]), kerr.ErrorForCode(code))
		}
	}
	if code := as(t, tb.b, "User:bob", req).(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("bob alter: %v", kerr.ErrorForCode(code))
	}
	if code := as(t, tb.b, "User:bob", kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("bob describe: %v", kerr.ErrorForCode(code))
	}
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256},
		{User: "alice", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || !altered.Ok() {
		t.Fatalf("delete: %v %+v", err, altered)
	}
	described, err = adm.DescribeUserSCRAMs(ctx, "alice")
	if err != nil || described["alice"].Err != kerr.ResourceNotFound {
		t.Fatalf("describe a deleted user: %v %+v", err, described)
	}
}
