package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/metadata"
)

func row(node int32, topic string, partition int32, leader bool, local, tiered int64) nodeTierStatus {
	return nodeTierStatus{Node: node, PartitionTierStatus: broker.PartitionTierStatus{
		Topic: topic, Partition: partition, Leader: leader, LocalBytes: local, TieredBytes: tiered}}
}

// TestMergeTierAnswers: rows are tagged with their broker and sorted by
// topic, partition, node; brokers without an answer are listed with why.
func TestMergeTierAnswers(t *testing.T) {
	st := func(topic string, p int32, leader bool) broker.PartitionTierStatus {
		return broker.PartitionTierStatus{Topic: topic, Partition: p, Leader: leader}
	}
	got := mergeTierAnswers([]brokerAnswer{
		{info: metadata.BrokerInfo{NodeID: 2, HTTP: "b2:1"}, status: []broker.PartitionTierStatus{st("b", 0, true), st("a", 1, false)}},
		{info: metadata.BrokerInfo{NodeID: 3, HTTP: "b3:1"}, err: errors.New("connection refused")},
		{info: metadata.BrokerInfo{NodeID: 1}, err: errNoHTTPAddress},
		{info: metadata.BrokerInfo{NodeID: 4, HTTP: "b4:1"}, status: []broker.PartitionTierStatus{st("a", 1, true)}},
	})
	var order []string
	for _, r := range got.Partitions {
		order = append(order, fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Node))
	}
	if want := []string{"a/1@2", "a/1@4", "b/0@2"}; !slices.Equal(order, want) {
		t.Errorf("rows %v, want %v", order, want)
	}
	want := []unreachableBroker{{Node: 1, Error: errNoHTTPAddress.Error()}, {Node: 3, HTTP: "b3:1", Error: "connection refused"}}
	if !slices.Equal(got.Unreachable, want) {
		t.Errorf("unreachable %+v, want %+v", got.Unreachable, want)
	}
	empty, _ := json.Marshal(mergeTierAnswers(nil))
	if string(empty) != `{"partitions":[],"unreachable":[]}` {
		t.Errorf("empty answer %s: want arrays, not null", empty)
	}
}

// TestSelectTierRows: the leaders view keeps the leader's row of each
// partition and names every replica that answered; without an answering
// leader it falls back to the first replica; empty internal partitions
// are hidden unless all is set.
func TestSelectTierRows(t *testing.T) {
	rows := []nodeTierStatus{
		row(1, "__consumer_offsets", 0, true, 0, 0),
		row(2, "__consumer_offsets", 0, false, 0, 0),
		row(1, "__consumer_offsets", 1, false, 0, 0),
		row(2, "__consumer_offsets", 1, true, 120, 0), // holds bytes: shown
		row(1, "events", 0, false, 10, 100),
		row(2, "events", 0, true, 20, 100),
		row(3, "events", 0, false, 30, 100),
		row(2, "events", 1, false, 0, 0), // its leader did not answer
		row(3, "events", 1, false, 0, 0),
		row(1, "empty", 0, true, 0, 0), // not internal: shown though empty
	}
	type shown struct {
		topic     string
		partition int32
		node      int32
		leader    bool
		replicas  string
	}
	summarize := func(rs []tierRow) []shown {
		out := []shown{}
		for _, r := range rs {
			out = append(out, shown{r.Topic, r.Partition, r.Node, r.Leader, fmt.Sprint(r.Replicas)})
		}
		return out
	}
	leaders := summarize(selectTierRows(rows, viewLeaders, false))
	want := []shown{
		{"__consumer_offsets", 1, 2, true, "[1 2]"},
		{"events", 0, 2, true, "[1 2 3]"},
		{"events", 1, 2, false, "[2 3]"},
		{"empty", 0, 1, true, "[1]"},
	}
	if !slices.Equal(leaders, want) {
		t.Errorf("leaders view\n got %+v\nwant %+v", leaders, want)
	}
	if n := len(selectTierRows(rows, viewLeaders, true)); n != 5 {
		t.Errorf("leaders view with --all: %d rows, want 5", n)
	}
	replicas := selectTierRows(rows, viewReplicas, false)
	if len(replicas) != 8 {
		t.Errorf("replicas view: %d rows, want 8 (all but the empty internal partition's two)", len(replicas))
	}
	for _, r := range replicas {
		if r.Replicas != nil {
			t.Errorf("replicas view row names replicas: %+v", r)
		}
	}
	if got := selectTierRows(nil, viewLeaders, false); got == nil || len(got) != 0 {
		t.Errorf("no rows: %#v, want an empty slice", got)
	}
}

// TestPrintTierStatusViews: the leaders view has LEADER and REPLICAS
// columns ("-" without an answering leader), the replicas view BROKER and
// ROLE; sizes are in human units.
func TestPrintTierStatusViews(t *testing.T) {
	rows := []nodeTierStatus{row(1, "t", 0, false, 3<<20, 5<<30), row(2, "t", 0, true, 3<<20, 5<<30), row(1, "t", 1, false, 0, 0)}
	var out strings.Builder
	if err := printTierStatus(&out, viewLeaders, selectTierRows(rows, viewLeaders, false)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "LEADER") || !strings.Contains(lines[0], "REPLICAS") ||
		!regexpMatch(`^t\s+0\s+2\s+1,2\s.*3\.0 MiB.*5\.0 GiB`, lines[1]) || !regexpMatch(`^t\s+1\s+-\s+1\s`, lines[2]) {
		t.Errorf("leaders view:\n%s", out.String())
	}
	out.Reset()
	if err := printTierStatus(&out, viewReplicas, selectTierRows(rows, viewReplicas, false)); err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "BROKER") || !regexpMatch(`^t\s+0\s+1\s+follower\s`, lines[1]) ||
		!regexpMatch(`^t\s+0\s+2\s+leader\s`, lines[2]) {
		t.Errorf("replicas view:\n%s", out.String())
	}
}

// fakeTierSource is a broker for gatherTierStatus.
type fakeTierSource struct {
	self    int32
	brokers []metadata.BrokerInfo
	status  []broker.PartitionTierStatus
}

func (f *fakeTierSource) NodeID() int32                      { return f.self }
func (f *fakeTierSource) LiveBrokers() []metadata.BrokerInfo { return f.brokers }
func (f *fakeTierSource) ReplicaTierStatus(topic string) []broker.PartitionTierStatus {
	var out []broker.PartitionTierStatus
	for _, st := range f.status {
		if topic == "" || st.Topic == topic {
			out = append(out, st)
		}
	}
	return out
}

// TestGatherTierStatus: the asked broker answers for itself without a
// round trip, asks each peer for its own scope (passing the topic on), and
// reports the peers that failed, refused or registered no address.
func TestGatherTierStatus(t *testing.T) {
	peerQueries := make(chan string, 10)
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peerQueries <- r.URL.RawQuery
		_ = json.NewEncoder(w).Encode([]broker.PartitionTierStatus{{Topic: "t", Partition: 0, Leader: true, TieredBytes: 7}})
	}))
	defer peer.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "broker not started", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	src := &fakeTierSource{self: 1, status: []broker.PartitionTierStatus{{Topic: "t", Partition: 0}, {Topic: "u", Partition: 0}},
		brokers: []metadata.BrokerInfo{
			{NodeID: 1, HTTP: "unused:1"}, {NodeID: 2, HTTP: strings.TrimPrefix(peer.URL, "http://")},
			{NodeID: 3, HTTP: strings.TrimPrefix(failing.URL, "http://")}, {NodeID: 4, HTTP: closedAddr}, {NodeID: 5},
		}}
	got := gatherTierStatus(context.Background(), src, "t")
	if len(got.Partitions) != 2 || got.Partitions[0].Node != 1 || got.Partitions[1].Node != 2 || got.Partitions[1].TieredBytes != 7 {
		t.Errorf("partitions %+v", got.Partitions)
	}
	close(peerQueries)
	var q []string
	for query := range peerQueries {
		q = append(q, query)
	}
	if !slices.Equal(q, []string{"topic=t"}) {
		t.Errorf("peer asked with %q, want its own scope of topic t", q)
	}
	var unreachable []int32
	for _, u := range got.Unreachable {
		unreachable = append(unreachable, u.Node)
	}
	if !slices.Equal(unreachable, []int32{3, 4, 5}) || !strings.Contains(got.Unreachable[0].Error, "503") ||
		got.Unreachable[2].Error != errNoHTTPAddress.Error() {
		t.Errorf("unreachable %+v", got.Unreachable)
	}
}

// TestTierStatusScopes: the default scope keeps its array; an unknown
// scope is refused.
func TestTierStatusScopes(t *testing.T) {
	h, err := startHTTP("127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	base := "http://" + h.addr.String() + "/v1/tier/status"
	if code, _ := get(t, base); code != http.StatusServiceUnavailable {
		t.Errorf("before start: %d", code)
	}
	h.tier.Store(&tierSource{broker: nil})
	if code, body := get(t, base+"?scope=everything"); code != http.StatusBadRequest || !strings.Contains(body, "scope") {
		t.Errorf("unknown scope: %d %q", code, body)
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
