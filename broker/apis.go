package broker

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/wire"
)

// apiHandler is a handler as a method expression, so that the registry can
// be a package-level table and bound to a broker when the broker is built.
type apiHandler func(b *Broker, ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error)

// apiSpec is everything the broker knows about one Kafka API: the versions
// it serves (what kmsg knows and franz-go, librdkafka 2.x and the Java
// 3.x/4.x clients send), its handler, and the facts the connection and the
// quotas act on.
type apiSpec struct {
	key                    int16
	minVersion, maxVersion int16
	handle                 apiHandler
	// preAuth: served on a SASL listener before the client authenticated.
	preAuth bool
	// waitsInHandler: the handler parks (long polls, acks=all,
	// rebalances), so its wall time is not request-handler time (quotas.go).
	waitsInHandler bool
}

// apiSpecs is the one registry of supported APIs, in key order: the
// ApiVersions answer and the dispatcher are both built from it
// (newAPITable). A key absent here closes the connection that sends it.
var apiSpecs = []apiSpec{
	// Produce: v3+ carries RecordBatch v2 only; v12+ adds transactional
	// partitions implicitly (KIP-890).
	{key: 0, minVersion: 3, maxVersion: 12, handle: (*Broker).handleProduce, waitsInHandler: true},
	{key: 1, minVersion: 4, maxVersion: 16, handle: (*Broker).handleFetch, waitsInHandler: true}, // Fetch: v13+ by topic id
	// ListOffsets: -3 v7, -4 v8, -5 v9; v11 (-6, earliest local) not yet.
	{key: 2, minVersion: 1, maxVersion: 10, handle: (*Broker).handleListOffsets},
	{key: 3, minVersion: 0, maxVersion: 13, handle: (*Broker).handleMetadata},
	// OffsetCommit: v10 addresses topics by id (KIP-848), not served.
	{key: 8, minVersion: 0, maxVersion: 9, handle: (*Broker).handleOffsetCommit},
	{key: 9, minVersion: 0, maxVersion: 9, handle: (*Broker).handleOffsetFetch},
	{key: 10, minVersion: 0, maxVersion: 6, handle: (*Broker).handleFindCoordinator},
	{key: 11, minVersion: 0, maxVersion: 9, handle: (*Broker).handleJoinGroup, waitsInHandler: true},
	{key: 12, minVersion: 0, maxVersion: 4, handle: (*Broker).handleHeartbeat},
	{key: 13, minVersion: 0, maxVersion: 5, handle: (*Broker).handleLeaveGroup},
	{key: 14, minVersion: 0, maxVersion: 5, handle: (*Broker).handleSyncGroup, waitsInHandler: true},
	{key: 15, minVersion: 0, maxVersion: 5, handle: (*Broker).handleDescribeGroups},
	{key: 16, minVersion: 0, maxVersion: 5, handle: (*Broker).handleListGroups},
	// SaslHandshake and SaslAuthenticate are served by the connection's
	// reader itself (wire.SASLSession); their handler is never reached.
	{key: wire.SASLHandshakeKey, minVersion: 0, maxVersion: 1, handle: (*Broker).handleSASLUnreachable, preAuth: true},
	{key: wire.APIVersionsKey, minVersion: 0, maxVersion: 4, handle: (*Broker).handleApiVersions, preAuth: true},
	{key: 19, minVersion: 0, maxVersion: 7, handle: (*Broker).handleCreateTopics},
	{key: 20, minVersion: 0, maxVersion: 6, handle: (*Broker).handleDeleteTopics},
	{key: 21, minVersion: 0, maxVersion: 2, handle: (*Broker).handleDeleteRecords},
	{key: 22, minVersion: 0, maxVersion: 5, handle: (*Broker).handleInitProducerID}, // transactional ids: txn_wiring.go
	{key: 23, minVersion: 0, maxVersion: 4, handle: (*Broker).handleOffsetForLeaderEpoch},
	{key: 24, minVersion: 0, maxVersion: 5, handle: (*Broker).handleAddPartitionsToTxn}, // v4+ batched, verify-only form
	{key: 25, minVersion: 0, maxVersion: 4, handle: (*Broker).handleAddOffsetsToTxn},
	// EndTxn v5 bumps the producer epoch at every commit and abort
	// (KIP-890 part 2); clients use it when transaction.version is 2.
	{key: 26, minVersion: 0, maxVersion: 5, handle: (*Broker).handleEndTxn},
	{key: 27, minVersion: 0, maxVersion: 1, handle: (*Broker).handleWriteTxnMarkers},
	// TxnOffsetCommit v5+: the offsets partition is added implicitly
	// (KIP-890 part 2).
	{key: 28, minVersion: 0, maxVersion: 5, handle: (*Broker).handleTxnOffsetCommit},
	{key: 29, minVersion: 0, maxVersion: 3, handle: (*Broker).handleDescribeACLs},
	{key: 30, minVersion: 0, maxVersion: 3, handle: (*Broker).handleCreateACLs},
	{key: 31, minVersion: 0, maxVersion: 3, handle: (*Broker).handleDeleteACLs},
	{key: 32, minVersion: 0, maxVersion: 4, handle: (*Broker).handleDescribeConfigs},
	{key: 33, minVersion: 0, maxVersion: 2, handle: (*Broker).handleAlterConfigs},
	{key: wire.SASLAuthenticateKey, minVersion: 0, maxVersion: 2, handle: (*Broker).handleSASLUnreachable, preAuth: true},
	{key: 35, minVersion: 0, maxVersion: 4, handle: (*Broker).handleDescribeLogDirs},
	{key: 37, minVersion: 0, maxVersion: 3, handle: (*Broker).handleCreatePartitions},
	{key: 42, minVersion: 0, maxVersion: 2, handle: (*Broker).handleDeleteGroups},
	{key: 43, minVersion: 0, maxVersion: 2, handle: (*Broker).handleElectLeaders},
	{key: 44, minVersion: 0, maxVersion: 1, handle: (*Broker).handleIncrementalAlterConfigs},
	{key: 45, minVersion: 0, maxVersion: 0, handle: (*Broker).handleAlterPartitionReassignments},
	{key: 46, minVersion: 0, maxVersion: 0, handle: (*Broker).handleListPartitionReassignments},
	{key: 47, minVersion: 0, maxVersion: 0, handle: (*Broker).handleOffsetDelete},
	{key: 48, minVersion: 0, maxVersion: 1, handle: (*Broker).handleDescribeClientQuotas}, // KIP-546
	{key: 49, minVersion: 0, maxVersion: 1, handle: (*Broker).handleAlterClientQuotas},
	{key: 50, minVersion: 0, maxVersion: 0, handle: (*Broker).handleDescribeUserSCRAMCredentials},
	{key: 51, minVersion: 0, maxVersion: 0, handle: (*Broker).handleAlterUserSCRAMCredentials},
	{key: 57, minVersion: 0, maxVersion: 2, handle: (*Broker).handleUpdateFeatures},
	{key: 60, minVersion: 0, maxVersion: 1, handle: (*Broker).handleDescribeCluster},
	{key: 61, minVersion: 0, maxVersion: 0, handle: (*Broker).handleDescribeProducers},
	{key: 65, minVersion: 0, maxVersion: 0, handle: (*Broker).handleDescribeTransactions},
	{key: 66, minVersion: 0, maxVersion: 2, handle: (*Broker).handleListTransactions},
	{key: 68, minVersion: 0, maxVersion: 1, handle: (*Broker).handleConsumerGroupHeartbeat},  // KIP-848
	{key: 69, minVersion: 0, maxVersion: 1, handle: (*Broker).handleConsumerGroupDescribe},   // KIP-848
	{key: 75, minVersion: 0, maxVersion: 0, handle: (*Broker).handleDescribeTopicPartitions}, // KIP-966
}

// apiEntry is one row of the dispatch table: an apiSpec bound to a broker.
type apiEntry struct {
	spec   apiSpec
	handle handlerFunc
}

// apiTable maps an API key to its entry. Built once by newAPITable;
// read-only afterwards (tests may replace handlers before serving).
type apiTable map[int16]apiEntry

// newAPITable binds the registry to b, which may be nil in decode-only
// tests: handlers are then never called, and quotas do not wrap them.
func newAPITable(b *Broker) apiTable {
	t := make(apiTable, len(apiSpecs))
	for _, spec := range apiSpecs {
		if _, dup := t[spec.key]; dup {
			panic(fmt.Sprintf("broker: api key %d registered twice", spec.key))
		}
		spec.maxVersion = clampToKmsg(spec.key, spec.maxVersion)
		t[spec.key] = apiEntry{spec: spec, handle: bind(b, spec)}
	}
	return t
}

// bind makes spec's handler a handlerFunc of b, wrapped with the client
// quotas (quotas.go).
func bind(b *Broker, spec apiSpec) handlerFunc {
	handle := spec.handle
	h := func(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error) {
		return handle(b, ctx, rc, req)
	}
	if b == nil {
		return h
	}
	return b.withQuotas(spec.key, h)
}

// clampToKmsg never advertises a version kmsg cannot decode.
func clampToKmsg(key, maxVersion int16) int16 {
	if req := kmsg.RequestForKey(key); req != nil && req.MaxVersion() < maxVersion {
		return req.MaxVersion()
	}
	return maxVersion
}

// apiKeys lists the supported keys in key order (the ApiVersions answer).
func (t apiTable) apiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(t))
	for key, e := range t {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, e.spec.minVersion, e.spec.maxVersion
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// preAuthAllowed: the API may be served on a SASL listener before the
// client authenticated (ApiVersions and the SASL exchange).
func (t apiTable) preAuthAllowed(key int16) bool {
	return t[key].spec.preAuth
}

// specOf is key's registry entry; the zero apiSpec for an unknown key.
func specOf(key int16) apiSpec {
	for _, spec := range apiSpecs {
		if spec.key == key {
			return spec
		}
	}
	return apiSpec{}
}
