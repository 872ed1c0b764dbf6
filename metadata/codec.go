package metadata

// Keys and JSON values, as documented in doc.go. Decoders treat etcd values as
// outside input: every error wraps ErrCorrupt, nothing panics, and counts are
// bounded (etcd itself bounds a value to its max request size, ~1.5 MiB).

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

const (
	// MaxPartitions bounds a topic's partition count so that a partition
	// index fits the 5 digits of its key.
	MaxPartitions = 100000
	// MaxReplicationFactor bounds a partition's replica list.
	MaxReplicationFactor = 64
	// maxBrokerHost bounds a registered host name (DNS names are ≤ 253).
	maxBrokerHost = 255
	// maxBrokerAddr bounds a registered host:port.
	maxBrokerAddr = maxBrokerHost + len(":65535")
)

// keys builds the keys of one cluster; prefix is "/strata/<cluster>/".
type keys struct{ prefix string }

func newKeys(cluster string) keys { return keys{prefix: "/strata/" + cluster + "/"} }

func (k keys) clusterID() string         { return k.prefix + "cluster-id" }
func (k keys) topics() string            { return k.prefix + "topics/" }
func (k keys) topic(name string) string  { return k.topics() + name }
func (k keys) topicIDs() string          { return k.prefix + "topic-ids/" }
func (k keys) topicID(id TopicID) string { return k.topicIDs() + id.String() }
func (k keys) partitions() string        { return k.prefix + "partitions/" }
func (k keys) tier(id TopicID) string    { return k.prefix + "tier/" + id.String() + "/" }
func (k keys) brokers() string           { return k.prefix + "brokers/" }
func (k keys) broker(id int32) string    { return k.brokers() + strconv.Itoa(int(id)) }
func (k keys) producerIDs() string       { return k.prefix + "producer-ids/next" }
func (k keys) deletedTopic(id TopicID) string {
	return k.prefix + "deleted-topics/" + id.String()
}
func (k keys) partitionsOf(id TopicID) string {
	return k.partitions() + id.String() + "/"
}
func (k keys) partition(id TopicID, p int32) string {
	return fmt.Sprintf("%s%05d", k.partitionsOf(id), p)
}

// ControllerPrefix is the key prefix reserved for the controller election
// (client/v3/concurrency.NewElection).
func (s *Store) ControllerPrefix() string { return s.keys.prefix + "controller/" }

// parsePartitionKey splits "<topicId>/<partition:05>" (the part after
// partitions/).
func parsePartitionKey(rest string) (TopicID, int32, error) {
	idPart, pPart, ok := strings.Cut(rest, "/")
	if !ok || len(pPart) != 5 {
		return TopicID{}, 0, fmt.Errorf("%w: partition key %q", ErrCorrupt, rest)
	}
	id, err := ParseTopicID(idPart)
	if err != nil {
		return TopicID{}, 0, err
	}
	p, err := strconv.ParseUint(pPart, 10, 32)
	if err != nil || p >= MaxPartitions {
		return TopicID{}, 0, fmt.Errorf("%w: partition key %q", ErrCorrupt, rest)
	}
	return id, int32(p), nil
}

// topicRecord is the JSON of topics/<name>.
type topicRecord struct {
	ID       string            `json:"id"`
	Replicas [][]int32         `json:"replicas"`
	Configs  map[string]string `json:"configs,omitempty"`
	Internal bool              `json:"internal,omitempty"`
}

func encodeTopic(t Topic) ([]byte, error) {
	return json.Marshal(topicRecord{ID: t.ID.String(), Replicas: t.Replicas, Configs: t.Configs, Internal: t.Internal})
}

// decodeTopic decodes and checks a topic record; rev is the key's ModRevision.
func decodeTopic(name string, value []byte, rev int64) (Topic, error) {
	var rec topicRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return Topic{}, fmt.Errorf("%w: topic %q: %v", ErrCorrupt, name, err)
	}
	id, err := ParseTopicID(rec.ID)
	if err != nil {
		return Topic{}, fmt.Errorf("topic %q: %w", name, err)
	}
	if id.IsZero() {
		return Topic{}, fmt.Errorf("%w: topic %q has the zero id", ErrCorrupt, name)
	}
	if err := validateTopicAssignment(rec.Replicas, DisklessConfigs(rec.Configs)); err != nil {
		return Topic{}, fmt.Errorf("%w: topic %q: %v", ErrCorrupt, name, err)
	}
	if rec.Configs == nil {
		rec.Configs = map[string]string{}
	}
	return Topic{Name: name, ID: id, Internal: rec.Internal, Replicas: rec.Replicas, Configs: rec.Configs, Revision: rev}, nil
}

// validateTopicAssignment checks a topic record's assignment: a classic
// topic's (validateAssignment), or a diskless topic's, which is
// 1..MaxPartitions empty lists: its partitions have no replicas.
func validateTopicAssignment(replicas [][]int32, diskless bool) error {
	if !diskless {
		return validateAssignment(replicas)
	}
	if len(replicas) == 0 || len(replicas) > MaxPartitions {
		return fmt.Errorf("%w: %d partitions, want 1..%d", ErrInvalidPartitions, len(replicas), MaxPartitions)
	}
	for p, list := range replicas {
		if len(list) != 0 {
			return fmt.Errorf("%w: partition %d: diskless partitions have no replicas, %v given", ErrInvalidReplicas, p, list)
		}
	}
	return nil
}

// DisklessAssignment is the assignment of a diskless topic's partitions
// (or of partitions added to one): n empty replica lists.
func DisklessAssignment(n int) [][]int32 {
	out := make([][]int32, n)
	for i := range out {
		out[i] = []int32{}
	}
	return out
}

// validateAssignment checks a classic topic's replica assignment:
// 1..MaxPartitions partitions, each a valid replica list.
func validateAssignment(replicas [][]int32) error {
	if len(replicas) == 0 || len(replicas) > MaxPartitions {
		return fmt.Errorf("%w: %d partitions, want 1..%d", ErrInvalidPartitions, len(replicas), MaxPartitions)
	}
	for p, list := range replicas {
		if err := validateReplicaList(list); err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
	}
	return nil
}

// validateReplicaList: 1..MaxReplicationFactor distinct non-negative ids.
func validateReplicaList(list []int32) error {
	if len(list) == 0 || len(list) > MaxReplicationFactor {
		return fmt.Errorf("%w: %d replicas, want 1..%d", ErrInvalidReplicas, len(list), MaxReplicationFactor)
	}
	return validateIDSet(list)
}

// validateIDSet: distinct non-negative broker ids.
func validateIDSet(list []int32) error {
	for i, id := range list {
		if id < 0 {
			return fmt.Errorf("%w: negative broker id %d", ErrInvalidReplicas, id)
		}
		for _, other := range list[:i] {
			if other == id {
				return fmt.Errorf("%w: broker id %d listed twice", ErrInvalidReplicas, id)
			}
		}
	}
	return nil
}

// partitionRecord is the JSON of partitions/<topicId>/<partition>.
type partitionRecord struct {
	Leader            int32   `json:"leader"`
	LeaderEpoch       int32   `json:"leaderEpoch"`
	Replicas          []int32 `json:"replicas"`
	ISR               []int32 `json:"isr"`
	LeaderBrokerEpoch int64   `json:"leaderBrokerEpoch,omitempty"`
	AddingReplicas    []int32 `json:"addingReplicas,omitempty"`
	RemovingReplicas  []int32 `json:"removingReplicas,omitempty"`
	ReassignStartMs   int64   `json:"reassignStartMs,omitempty"`
}

func encodePartitionState(st PartitionState) ([]byte, error) {
	if err := checkPartitionState(st); err != nil {
		return nil, err
	}
	isr := st.ISR
	if isr == nil {
		isr = []int32{}
	}
	return json.Marshal(partitionRecord{Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, Replicas: st.Replicas, ISR: isr,
		LeaderBrokerEpoch: st.LeaderBrokerEpoch, AddingReplicas: st.AddingReplicas, RemovingReplicas: st.RemovingReplicas,
		ReassignStartMs: st.ReassignStartMs})
}

// decodePartitionState decodes and checks a state; rev is the key's ModRevision.
func decodePartitionState(value []byte, rev int64) (PartitionState, error) {
	var rec partitionRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return PartitionState{}, fmt.Errorf("%w: partition state: %v", ErrCorrupt, err)
	}
	st := PartitionState{Leader: rec.Leader, LeaderEpoch: rec.LeaderEpoch, Replicas: rec.Replicas, ISR: rec.ISR,
		LeaderBrokerEpoch: rec.LeaderBrokerEpoch, AddingReplicas: rec.AddingReplicas, RemovingReplicas: rec.RemovingReplicas,
		ReassignStartMs: rec.ReassignStartMs, Version: rev}
	if err := checkPartitionState(st); err != nil {
		return PartitionState{}, fmt.Errorf("%w: partition state: %v", ErrCorrupt, err)
	}
	if st.ISR == nil {
		st.ISR = []int32{}
	}
	return st, nil
}

// checkPartitionState: valid replicas; ISR distinct and within replicas;
// leader -1 or a replica; epoch ≥ 0.
func checkPartitionState(st PartitionState) error {
	if err := validateReplicaList(st.Replicas); err != nil {
		return err
	}
	if len(st.ISR) > len(st.Replicas) {
		return fmt.Errorf("%w: ISR larger than replicas", ErrInvalidReplicas)
	}
	if err := validateIDSet(st.ISR); err != nil {
		return err
	}
	for _, id := range st.ISR {
		if !containsID(st.Replicas, id) {
			return fmt.Errorf("%w: ISR member %d is not a replica", ErrInvalidReplicas, id)
		}
	}
	for _, moving := range [][]int32{st.AddingReplicas, st.RemovingReplicas} {
		if err := validateIDSet(moving); err != nil {
			return err
		}
		for _, id := range moving {
			if !containsID(st.Replicas, id) {
				return fmt.Errorf("%w: reassigned replica %d is not a replica", ErrInvalidReplicas, id)
			}
		}
	}
	for _, id := range st.AddingReplicas {
		if containsID(st.RemovingReplicas, id) {
			return fmt.Errorf("%w: replica %d both added and removed", ErrInvalidReplicas, id)
		}
	}
	if len(st.RemovingReplicas) >= len(st.Replicas) {
		return fmt.Errorf("%w: a reassignment removes every replica", ErrInvalidReplicas)
	}
	if st.Leader != -1 && !containsID(st.Replicas, st.Leader) {
		return fmt.Errorf("%w: leader %d is not a replica", ErrInvalidReplicas, st.Leader)
	}
	if st.LeaderEpoch < 0 {
		return fmt.Errorf("%w: negative leader epoch %d", ErrInvalidReplicas, st.LeaderEpoch)
	}
	return nil
}

func containsID(list []int32, id int32) bool {
	for _, x := range list {
		if x == id {
			return true
		}
	}
	return false
}

// initialPartitionState is the state of a partition whose key was never
// written: first replica leads at epoch 0, every replica in sync.
func initialPartitionState(replicas []int32) PartitionState {
	leader := int32(-1) // a diskless partition: no replicas, so nobody leads it
	if len(replicas) > 0 {
		leader = replicas[0]
	}
	return PartitionState{
		Leader:      leader,
		LeaderEpoch: 0,
		Replicas:    append([]int32(nil), replicas...),
		ISR:         append([]int32(nil), replicas...),
		Version:     0,
	}
}

// brokerRecord is the JSON of brokers/<nodeId>.
type brokerRecord struct {
	NodeID   int32  `json:"nodeId"`
	Host     string `json:"host"`
	Port     int32  `json:"port"`
	Rack     string `json:"rack,omitempty"`
	Epoch    int64  `json:"epoch,omitempty"`
	Draining bool   `json:"draining,omitempty"`
	// Endpoints: listener name -> advertised host:port.
	Endpoints map[string]string `json:"endpoints,omitempty"`
	// HTTP: advertised host:port of the HTTP server (absent before).
	HTTP string `json:"http,omitempty"`
}

func encodeBroker(b BrokerInfo) ([]byte, error) {
	if err := checkBroker(b); err != nil {
		return nil, err
	}
	return json.Marshal(brokerRecord(b))
}

func decodeBroker(value []byte) (BrokerInfo, error) {
	var rec brokerRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return BrokerInfo{}, fmt.Errorf("%w: broker: %v", ErrCorrupt, err)
	}
	b := BrokerInfo(rec)
	if err := checkBroker(b); err != nil {
		return BrokerInfo{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return b, nil
}

func checkBroker(b BrokerInfo) error {
	if b.NodeID < 0 || b.Port < 0 || b.Port > 65535 || b.Host == "" ||
		len(b.Host) > maxBrokerHost || len(b.Rack) > maxBrokerHost || len(b.HTTP) > maxBrokerAddr {
		return fmt.Errorf("metadata: invalid broker registration %+v", b)
	}
	if len(b.Endpoints) > MaxBrokerEndpoints {
		return fmt.Errorf("metadata: broker %d registers %d listeners (max %d)", b.NodeID, len(b.Endpoints), MaxBrokerEndpoints)
	}
	for name, addr := range b.Endpoints {
		if name == "" || len(name) > maxBrokerHost || addr == "" || len(addr) > maxBrokerAddr {
			return fmt.Errorf("metadata: broker %d: invalid listener endpoint %q=%q", b.NodeID, name, addr)
		}
	}
	return nil
}

// decodeCounter parses producer-ids/next.
func decodeCounter(value []byte) (int64, error) {
	n, err := strconv.ParseInt(string(value), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: producer id counter %q", ErrCorrupt, value)
	}
	return n, nil
}
