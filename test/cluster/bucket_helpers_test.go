package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBucketHelpers checks the pure helpers of the bucket tests (no
// cluster): percentiles, label matching, the timed values, replay's JSON
// and the settings.
func TestBucketHelpers(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p50, p99, worst := percentiles(ds); p50 != 100*time.Millisecond || p99 != 198*time.Millisecond || worst != 200*time.Millisecond {
		t.Errorf("percentiles of 1..200 ms: %v %v %v", p50, p99, worst)
	}
	if p50, p99, worst := percentiles(nil); p50 != 0 || p99 != 0 || worst != 0 {
		t.Errorf("percentiles of nothing: %v %v %v", p50, p99, worst)
	}
	if !hasLabels(`op="PUT",topic="trickle"`, map[string]string{"op": "PUT", "topic": "trickle"}) ||
		hasLabels(`op="PUT",topic="trickle-2"`, map[string]string{"topic": "trickle"}) {
		t.Error("hasLabels")
	}
	if v := timedValue(42, 30); len(v) != 30 || timedSeq(v) != 42 || timedSeq("other") != -1 {
		t.Errorf("timedValue/timedSeq: %q %d", v, timedSeq(v))
	}
	lines := `{"topic":"t","partition":1,"offset":7,"timestamp":1,"key":null,"value":"aGVsbG8=","headers":[]}
{"topic":"t","partition":1,"offset":8,"timestamp":1,"key":null,"value":null,"headers":[]}
`
	got, err := decodeReplay(strings.NewReader(lines))
	if err != nil || got[1][7] != "hello" || got[1][8] != "" || len(got[1]) != 2 {
		t.Errorf("decodeReplay: %v %v", got, err)
	}
	if _, err := decodeReplay(strings.NewReader(lines + lines)); err == nil {
		t.Error("decodeReplay accepted an offset printed twice")
	}
	now := time.Now()
	acked := []ackedRecord{{Partition: 0, Offset: 0, AckedAt: now.Add(-9 * time.Second)}, {Partition: 0, Offset: 1, AckedAt: now.Add(-3 * time.Second)},
		{Partition: 1, Offset: 0, AckedAt: now.Add(-5 * time.Second)}, {Partition: 1, Offset: 1, AckedAt: now.Add(time.Second)}}
	ages := missingAges(map[int32]map[int64]string{0: {0: "x"}}, acked, now)
	if len(ages) != 2 || ages[0] != 3*time.Second || ages[1] != 5*time.Second || recoveryPointAge(nil, acked, now) != 9*time.Second {
		t.Errorf("missingAges: %v", ages)
	}
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	if s, err := bucketCurrentFromEnv(env(nil)); err != nil || s.window != 90*time.Second || s.bound != 10*time.Second {
		t.Errorf("defaults: %+v %v", s, err)
	}
	if s, err := bucketCurrentFromEnv(env(map[string]string{"STRATA_BUCKET_SAMPLE": "5m", "STRATA_BUCKET_BOUND": "30s"})); err != nil ||
		s.window != 5*time.Minute || s.bound != 30*time.Second {
		t.Errorf("5m, 30s: %+v %v", s, err)
	}
	for _, bad := range []map[string]string{{"STRATA_BUCKET_SAMPLE": "x"}, {"STRATA_BUCKET_BOUND": "-1s"}, {"STRATA_BUCKET_BOUND": "500ms"}} {
		if _, err := bucketCurrentFromEnv(env(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestCommitOutcomes(t *testing.T) {
	req := kmsg.NewPtrOffsetCommitRequest()
	rt := kmsg.NewOffsetCommitRequestTopic()
	for p, off := range []int64{10, 20, 30} {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = int32(p), off
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrOffsetCommitResponse()
	st := kmsg.NewOffsetCommitResponseTopic()
	for p, code := range []int16{0, kerr.NotCoordinator.Code, 0} {
		sp := kmsg.NewOffsetCommitResponseTopicPartition()
		sp.Partition, sp.ErrorCode = int32(p), code
		st.Partitions = append(st.Partitions, sp)
	}
	resp.Topics = append(resp.Topics, st)
	got := commitOutcomes(req, resp)
	if len(got) != 3 || got[0].offset != 10 || got[0].err != nil || !errors.Is(got[1].err, kerr.NotCoordinator) ||
		got[2].partition != 2 || got[2].offset != 30 {
		t.Fatalf("outcomes %+v", got)
	}
}
