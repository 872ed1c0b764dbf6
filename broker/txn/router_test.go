package txn

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memCluster is an in-memory Cluster: leaders by partition, and the node
// coordinating every transactional id.
type memCluster struct {
	leaders     map[TopicPartition]int32 // absent: the partition does not exist
	coordinator int32
	stateKnown  bool // __transaction_state is known
}

var _ Cluster = (*memCluster)(nil)

func (c *memCluster) PartitionLeader(topic string, partition int32) (int32, bool) {
	leader, ok := c.leaders[TopicPartition{Topic: topic, Partition: partition}]
	if !ok {
		return -1, false
	}
	return leader, true
}

func (c *memCluster) PartitionExists(topic string, partition int32) bool {
	_, ok := c.leaders[TopicPartition{Topic: topic, Partition: partition}]
	return ok
}

func (c *memCluster) TopicKnown(topic string) bool { return topic == TopicName && c.stateKnown }

func (c *memCluster) Coordinator(context.Context, string) (int32, int16, string) {
	if c.coordinator < 0 {
		return -1, kerr.CoordinatorNotAvailable.Code, "no leader"
	}
	return c.coordinator, 0, ""
}

// memPeers answers requests with a handler per node; a node without one
// cannot be dialled. It records the requests each node received.
type memPeers struct {
	mu       sync.Mutex
	handlers map[int32]func(kmsg.Request) (kmsg.Response, error)
	received map[int32][]kmsg.Request
}

func (p *memPeers) Peer(node int32) (Peer, error) {
	h, ok := p.handlers[node]
	if !ok {
		return nil, errors.New("no address")
	}
	return memPeer{p: p, node: node, handle: h}, nil
}

type memPeer struct {
	p      *memPeers
	node   int32
	handle func(kmsg.Request) (kmsg.Response, error)
}

func (m memPeer) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	m.p.mu.Lock()
	if m.p.received == nil {
		m.p.received = map[int32][]kmsg.Request{}
	}
	m.p.received[m.node] = append(m.p.received[m.node], req)
	m.p.mu.Unlock()
	return m.handle(req)
}

// markerAnswer answers every partition of a WriteTxnMarkers request with
// the code codes gives it (0 when absent).
func markerAnswer(codes map[TopicPartition]int16) func(kmsg.Request) (kmsg.Response, error) {
	return func(kreq kmsg.Request) (kmsg.Response, error) {
		req := kreq.(*kmsg.WriteTxnMarkersRequest)
		resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					sp.Partition, sp.ErrorCode = p, codes[TopicPartition{Topic: t.Topic, Partition: p}]
					rt.Partitions = append(rt.Partitions, sp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp, nil
	}
}

func tp(topic string, partition int32) TopicPartition {
	return TopicPartition{Topic: topic, Partition: partition}
}

func sortedTPs(tps []TopicPartition) []TopicPartition {
	out := slices.Clone(tps)
	slices.SortFunc(out, func(a, b TopicPartition) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

func TestRouterSendMarkers(t *testing.T) {
	cluster := &memCluster{leaders: map[TopicPartition]int32{
		tp("a", 0): 1, tp("a", 1): 1, tp("b", 0): 1, tp("b", 1): 1, // leader 1 answers
		tp("c", 0): 2,  // leader 2 cannot be dialled
		tp("d", 0): -1, // no live leader
	}}
	peers := &memPeers{handlers: map[int32]func(kmsg.Request) (kmsg.Response, error){
		1: markerAnswer(map[TopicPartition]int16{
			tp("a", 1): kerr.InvalidProducerEpoch.Code, // a newer epoch ended it: done
			tp("b", 0): kerr.ProducerFenced.Code,       // likewise
			tp("b", 1): kerr.NotLeaderForPartition.Code,
		}),
	}}
	r := NewRouter(1, cluster, peers, nil)
	job := Markers{ProducerID: 7, ProducerEpoch: 3, Commit: true,
		Partitions: []TopicPartition{tp("a", 0), tp("a", 1), tp("b", 0), tp("b", 1), tp("c", 0), tp("d", 0), tp("gone", 0)}}
	retry := r.SendMarkers(context.Background(), job, 5)
	want := []TopicPartition{tp("b", 1), tp("c", 0), tp("d", 0)}
	if got := sortedTPs(retry); !slices.Equal(got, want) {
		t.Fatalf("retry = %v, want %v", got, want)
	}
	reqs := peers.received[1]
	if len(reqs) != 1 {
		t.Fatalf("leader 1 got %d requests, want 1", len(reqs))
	}
	m := reqs[0].(*kmsg.WriteTxnMarkersRequest).Markers[0]
	if m.ProducerID != 7 || m.ProducerEpoch != 3 || !m.Committed || m.CoordinatorEpoch != 5 || len(m.Topics) != 2 {
		t.Fatalf("marker = %+v", m)
	}
}

func TestRouterSendMarkersTransportError(t *testing.T) {
	cluster := &memCluster{leaders: map[TopicPartition]int32{tp("a", 0): 2, tp("a", 1): 2}}
	peers := &memPeers{handlers: map[int32]func(kmsg.Request) (kmsg.Response, error){
		2: func(kmsg.Request) (kmsg.Response, error) { return nil, errors.New("connection reset") },
	}}
	r := NewRouter(1, cluster, peers, nil)
	retry := r.SendMarkers(context.Background(), Markers{Partitions: []TopicPartition{tp("a", 0), tp("a", 1)}}, 0)
	if len(retry) != 2 {
		t.Fatalf("retry = %v, want both partitions", retry)
	}
}

// verifyAnswerWith answers every AddPartitionsToTxn question with code.
func verifyAnswerWith(code func() int16) func(kmsg.Request) (kmsg.Response, error) {
	return func(kreq kmsg.Request) (kmsg.Response, error) {
		req := kreq.(*kmsg.AddPartitionsToTxnRequest)
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, rt := range req.Transactions {
			var tps []TopicPartition
			var codes []int16
			for _, t := range rt.Topics {
				for _, p := range t.Partitions {
					tps, codes = append(tps, tp(t.Topic, p)), append(codes, code())
				}
			}
			resp.Transactions = append(resp.Transactions, AddPartitionsAnswer(rt.TransactionalID, tps, codes))
		}
		return resp, nil
	}
}

// memVerifyLog is a VerifyLog: needed says whether the producer has no
// ongoing transaction; confirms are the answers of successive confirms.
type memVerifyLog struct {
	needed   bool
	confirms []bool
	starts   int
}

func (l *memVerifyLog) StartTxnVerification(int64, int16) (uint64, bool) {
	l.starts++
	return uint64(l.starts), l.needed
}

func (l *memVerifyLog) ConfirmTxnVerification(int64, uint64) bool {
	if len(l.confirms) == 0 {
		return true
	}
	ok := l.confirms[0]
	l.confirms = l.confirms[1:]
	return ok
}

func TestRouterVerify(t *testing.T) {
	ask := Ask{ID: "t", ProducerID: 7, ProducerEpoch: 1, Topic: "a", Partition: 0}
	for _, tc := range []struct {
		name     string
		log      memVerifyLog
		known    bool
		answer   int16
		add      bool
		wantCode int16 // 0: nil error
		wantAsks int
	}{
		{name: "not needed", log: memVerifyLog{needed: false}, known: true, wantAsks: 0},
		{name: "in the transaction", log: memVerifyLog{needed: true}, known: true, wantAsks: 1},
		{name: "not in the transaction", log: memVerifyLog{needed: true}, known: true,
			answer: kerr.InvalidTxnState.Code, wantCode: kerr.InvalidTxnState.Code, wantAsks: 1},
		{name: "coordinator moving is retriable", log: memVerifyLog{needed: true}, known: true,
			answer: kerr.NotCoordinator.Code, wantCode: kerr.NotEnoughReplicas.Code, wantAsks: 1},
		{name: "fenced", log: memVerifyLog{needed: true}, known: true,
			answer: kerr.ProducerFenced.Code, wantCode: kerr.InvalidProducerEpoch.Code, wantAsks: 1},
		{name: "state topic unknown", log: memVerifyLog{needed: true}, known: false,
			wantCode: kerr.NotEnoughReplicas.Code, wantAsks: 0},
		{name: "marker between answer and append", log: memVerifyLog{needed: true, confirms: []bool{false}}, known: true,
			wantCode: kerr.InvalidTxnState.Code, wantAsks: 1},
		{name: "implicit add asks again after a marker", log: memVerifyLog{needed: true, confirms: []bool{false, true}},
			known: true, add: true, wantAsks: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := &memCluster{coordinator: 2, stateKnown: tc.known}
			peers := &memPeers{handlers: map[int32]func(kmsg.Request) (kmsg.Response, error){
				2: verifyAnswerWith(func() int16 { return tc.answer }),
			}}
			r := NewRouter(1, cluster, peers, nil)
			a := ask
			a.Add = tc.add
			err := r.Verify(context.Background(), &tc.log, a)
			var ve *VerifyError
			switch {
			case tc.wantCode == 0 && err != nil:
				t.Fatalf("Verify = %v, want nil", err)
			case tc.wantCode != 0 && (!errors.As(err, &ve) || ve.Code != tc.wantCode || !errors.Is(err, ErrVerification)):
				t.Fatalf("Verify = %v, want code %d", err, tc.wantCode)
			}
			if got := len(peers.received[2]); got != tc.wantAsks {
				t.Fatalf("asked %d times, want %d", got, tc.wantAsks)
			}
			if tc.wantAsks > 0 {
				rt := peers.received[2][0].(*kmsg.AddPartitionsToTxnRequest).Transactions[0]
				if rt.VerifyOnly == tc.add || rt.TransactionalID != "t" || rt.ProducerID != 7 {
					t.Fatalf("question = %+v", rt)
				}
			}
		})
	}
}

func TestRouterAskRetriesConcurrentTransactionsOfAnAdd(t *testing.T) {
	answers := []int16{kerr.ConcurrentTransactions.Code, kerr.ConcurrentTransactions.Code, 0}
	var mu sync.Mutex
	next := func() int16 {
		mu.Lock()
		defer mu.Unlock()
		code := answers[0]
		if len(answers) > 1 {
			answers = answers[1:]
		}
		return code
	}
	cluster := &memCluster{coordinator: 2, stateKnown: true}
	peers := &memPeers{handlers: map[int32]func(kmsg.Request) (kmsg.Response, error){2: verifyAnswerWith(next)}}
	r := NewRouter(1, cluster, peers, nil)
	if code, msg := r.ask(context.Background(), Ask{ID: "t", Topic: "a", Add: true}); code != 0 {
		t.Fatalf("ask = %d (%s), want 0", code, msg)
	}
	if got := len(peers.received[2]); got != 3 {
		t.Fatalf("asked %d times, want 3", got)
	}
	// A verification (not an add) answers CONCURRENT_TRANSACTIONS at once.
	answers = []int16{kerr.ConcurrentTransactions.Code}
	if code, _ := r.ask(context.Background(), Ask{ID: "t", Topic: "a"}); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("ask = %d, want CONCURRENT_TRANSACTIONS", code)
	}
}

func TestRouterAskUnreachableCoordinator(t *testing.T) {
	cluster := &memCluster{coordinator: 3, stateKnown: true}
	r := NewRouter(1, cluster, &memPeers{}, nil)
	if code, _ := r.ask(context.Background(), Ask{ID: "t", Topic: "a"}); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("ask = %d, want COORDINATOR_NOT_AVAILABLE", code)
	}
}

func TestFencedForVersion(t *testing.T) {
	if got := FencedForVersion(kerr.ProducerFenced.Code, true); got != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old client: %d", got)
	}
	if got := FencedForVersion(kerr.ProducerFenced.Code, false); got != kerr.ProducerFenced.Code {
		t.Fatalf("new client: %d", got)
	}
}

func TestRouterAddImplicitly(t *testing.T) {
	for _, tc := range []struct{ answer, want int16 }{
		{0, 0},
		{kerr.OperationNotAttempted.Code, kerr.CoordinatorNotAvailable.Code},
		{kerr.RequestTimedOut.Code, kerr.CoordinatorNotAvailable.Code},
		{kerr.InvalidProducerEpoch.Code, kerr.InvalidProducerEpoch.Code},
	} {
		cluster := &memCluster{coordinator: 2, stateKnown: true}
		peers := &memPeers{handlers: map[int32]func(kmsg.Request) (kmsg.Response, error){
			2: verifyAnswerWith(func() int16 { return tc.answer }),
		}}
		r := NewRouter(1, cluster, peers, nil)
		if got := r.AddImplicitly(context.Background(), Ask{ID: "t", Topic: "__consumer_offsets"}); got != tc.want {
			t.Errorf("answer %d: AddImplicitly = %d, want %d", tc.answer, got, tc.want)
		}
		rt := peers.received[2][0].(*kmsg.AddPartitionsToTxnRequest).Transactions[0]
		if rt.VerifyOnly {
			t.Errorf("an implicit add was sent as a verification")
		}
	}
}

func TestRouterAddPartitionsOfAnUnknownPartitionAttemptsNone(t *testing.T) {
	cluster := &memCluster{leaders: map[TopicPartition]int32{tp("a", 0): 1}}
	r := NewRouter(1, cluster, &memPeers{}, nil) // no Serve: the coordinator is not asked
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID = "t"
	rt.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{
		{Topic: "a", Partitions: []int32{0, 1}}, {Topic: "b", Partitions: []int32{0}},
	}
	res := r.AddPartitions(3, rt)
	want := map[TopicPartition]int16{
		tp("a", 0): kerr.OperationNotAttempted.Code,
		tp("a", 1): kerr.UnknownTopicOrPartition.Code,
		tp("b", 0): kerr.UnknownTopicOrPartition.Code,
	}
	got := map[TopicPartition]int16{}
	for _, rt := range res.Topics {
		for _, p := range rt.Partitions {
			got[tp(rt.Topic, p.Partition)] = p.ErrorCode
		}
	}
	if res.TransactionalID != "t" || len(got) != len(want) {
		t.Fatalf("answer = %+v", res)
	}
	for k, code := range want {
		if got[k] != code {
			t.Errorf("%v: code %d, want %d", k, got[k], code)
		}
	}
}
