package main

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/reassign"
)

func TestParseReassignFile(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		cancel  bool
		want    []reassignTarget
		wantErr string
	}{
		{name: "kafka's format, log dirs any",
			json: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]},
				{"topic":"u","partition":2,"replicas":[4]}]}`,
			want: []reassignTarget{{"t", 0, []int32{1, 2, 3}}, {"u", 2, []int32{4}}}},
		{name: "cancel ignores replicas",
			json:   `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},{"topic":"t","partition":1}]}`,
			cancel: true,
			want:   []reassignTarget{{"t", 0, nil}, {"t", 1, nil}}},
		{name: "missing replicas", json: `{"version":1,"partitions":[{"topic":"t","partition":0}]}`,
			wantErr: "plan file: t/0: want at least one replica"},
		{name: "misspelt field", json: `{"version":1,"partitions":[{"topic":"t","partition":0,"replica":[1]}]}`,
			wantErr: `unknown field "replica"`},
		{name: "version", json: `{"version":2,"partitions":[]}`, wantErr: "version 2, want 1"},
		{name: "empty", json: `{"version":1,"partitions":[]}`, wantErr: "no partitions"},
		{name: "duplicate broker", json: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}`,
			wantErr: "broker 1 is listed twice"},
		{name: "duplicate partition",
			json:    `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}`,
			wantErr: "t/0 is listed twice"},
		{name: "no partition number", json: `{"version":1,"partitions":[{"topic":"t","replicas":[1]}]}`,
			wantErr: "partitions[0]: want a topic and a partition >= 0"},
		{name: "log dir", json: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d"]}]}`,
			wantErr: `log dir "/d"`},
		{name: "not JSON", json: `version: 1`, wantErr: "plan file:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseReassignFile([]byte(tt.json), tt.cancel)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errUsage) {
					t.Fatalf("error %v, want a usage error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestReassignTargets(t *testing.T) {
	tests := []struct {
		topic     string
		partition int
		replicas  string
		cancel    bool
		want      []reassignTarget
		wantErr   string
	}{
		{topic: "t", partition: 3, replicas: "4, 2,3", want: []reassignTarget{{"t", 3, []int32{4, 2, 3}}}},
		{topic: "t", partition: 3, cancel: true, want: []reassignTarget{{"t", 3, nil}}},
		{topic: "t", partition: 3, wantErr: "want --replicas (or --cancel)"},
		{topic: "t", partition: 3, replicas: "1", cancel: true, wantErr: "--cancel takes no --replicas"},
		{topic: "t", partition: -1, replicas: "1", wantErr: "want --topic and --partition"},
		{topic: "t", partition: 0, replicas: "1,x", wantErr: `"x" is not a broker id`},
		{topic: "t", partition: 0, replicas: ",", wantErr: "want at least one replica"},
	}
	for _, tt := range tests {
		got, err := reassignTargets(tt.topic, tt.partition, tt.replicas, "", tt.cancel)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: error %v, want %q", tt, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%+v: got %+v, %v", tt, got, err)
		}
	}
	if _, err := reassignTargets("t", 0, "", "plan.json", false); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("--file with --topic: %v", err)
	}
}

// Metadata's brokers, racks and partitions become the planner's input;
// topics that failed to load, and diskless topics, are left out.
func TestClusterFromMetadata(t *testing.T) {
	rack := "a"
	md := kadm.Metadata{
		Brokers: kadm.BrokerDetails{{NodeID: 1, Rack: &rack}, {NodeID: 2}},
		Topics: kadm.TopicDetails{
			"t": {Topic: "t", Partitions: kadm.PartitionDetails{
				1: {Partition: 1, Leader: 2, Replicas: []int32{2, 1}},
				0: {Partition: 0, Leader: 1, Replicas: []int32{1, 2}},
			}},
			"broken": {Topic: "broken", Err: kerr.UnknownTopicOrPartition},
			"events": {Topic: "events", Partitions: kadm.PartitionDetails{
				0: {Partition: 0, Leader: 2, Replicas: []int32{2}, ISR: []int32{2}},
			}},
		},
	}
	want := reassign.Cluster{
		Brokers: []reassign.Broker{{ID: 1, Rack: "a"}, {ID: 2}},
		Partitions: []reassign.Partition{
			{Topic: "t", Partition: 0, Replicas: []int32{1, 2}, Leader: 1},
			{Topic: "t", Partition: 1, Replicas: []int32{2, 1}, Leader: 2},
		},
	}
	// events is diskless: Metadata shows its front broker, not replicas.
	if got := clusterFromMetadata(md, map[string]bool{"events": true}); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// The plan shows the moves, then each broker's counts before → after.
func TestPrintPlan(t *testing.T) {
	c := reassign.Cluster{
		Brokers: []reassign.Broker{{ID: 1, Rack: "a"}, {ID: 2, Rack: "b"}, {ID: 3, Rack: "a"}},
		Partitions: []reassign.Partition{
			{Topic: "t", Partition: 0, Replicas: []int32{1, 2}, Leader: 1},
			{Topic: "t", Partition: 1, Replicas: []int32{1, 2}, Leader: 1},
		},
	}
	r := newPlanReport(c, []reassign.Move{{Topic: "t", Partition: 1, From: []int32{1, 2}, To: []int32{3, 2}}})
	var out bytes.Buffer
	if err := printPlan(&out, r); err != nil {
		t.Fatal(err)
	}
	want := `1 partitions to move:
  PARTITION  FROM  TO
  t/1        1,2   3,2
brokers (replicas, preferred leaderships):
  BROKER  RACK  REPLICAS  LEADERS
  1       a     2 → 1     2 → 1
  2       b     2         0
  3       a     0 → 1     0 → 1
`
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
	var empty bytes.Buffer
	if err := printPlan(&empty, newPlanReport(c, nil)); err != nil || !strings.HasPrefix(empty.String(), "no partitions to move\n") {
		t.Errorf("empty plan printed %q, %v", empty.String(), err)
	}
	if got := r.targets(); !reflect.DeepEqual(got, []reassignTarget{{"t", 1, []int32{3, 2}}}) {
		t.Errorf("targets %+v", got)
	}
}

// One refusal is the error itself; several go to stderr, one a line.
func TestJoinRefusals(t *testing.T) {
	var stderr bytes.Buffer
	one := errors.New("t/0: INVALID_REPLICA_ASSIGNMENT: broker 9 is not registered")
	if err := joinRefusals(&stderr, []error{one}, 3); err != one || stderr.Len() > 0 {
		t.Errorf("one refusal: %v, stderr %q", err, stderr.String())
	}
	err := joinRefusals(&stderr, []error{one, errors.New("t/1: x")}, 3)
	if err == nil || err.Error() != "the broker refused 2 of 3 reassignments" || strings.Count(stderr.String(), "\n") != 2 {
		t.Errorf("two refusals: %v, stderr %q", err, stderr.String())
	}
}

func TestReassignProgressLine(t *testing.T) {
	p := reassignProgress{replicas: []int32{1, 2, 3, 4}, isr: []int32{1, 2, 3}, leader: 1, ongoing: true,
		adding: []int32{4}, removing: []int32{1}}
	if got, want := p.String(), "replicas 1,2,3,4  isr 1,2,3  leader 1  adding 4  removing 1"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	p.ongoing = false
	if got, want := p.String(), "replicas 1,2,3,4  isr 1,2,3  leader 1"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
