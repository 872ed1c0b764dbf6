package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listOffsets asks for one partition's offset at timestamp ts.
func listOneOffset(t *testing.T, cl *kgo.Client, topic string, ts int64, currentEpoch int32) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = ts, currentEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return requestDirect(t, cl, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

func TestListOffsets(t *testing.T) {
	b, adm, cl := dataPathBroker(t)
	createDataTopic(t, adm, "ts", 1, nil)
	// Two produce calls so that the records land in several batches;
	// timestamps are not monotonic in offset order (offset 2 has the max).
	base := time.UnixMilli(1_700_000_000_000)
	producer := newDataClient(t, b)
	var records []*kgo.Record
	for i, delta := range []int{0, 10, 50, 20, 30} {
		records = append(records, &kgo.Record{Topic: "ts", Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(delta) * time.Millisecond)})
	}
	produceSyncAll(t, producer, records[:2])
	produceSyncAll(t, producer, records[2:])
	ms := base.UnixMilli()
	tests := []struct {
		name          string
		ts            int64
		wantOffset    int64
		wantTimestamp int64
	}{
		{"latest", -1, 5, -1},
		{"earliest", -2, 0, -1},
		{"max timestamp", -3, 2, ms + 50},
		{"earliest local", -4, 0, -1},
		{"latest tiered", -5, -1, -1},
		{"exact timestamp", ms + 10, 1, ms + 10},
		{"between timestamps", ms + 15, 2, ms + 50},
		{"before all", ms - 1000, 0, ms},
		{"after all", ms + 51, -1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := listOneOffset(t, cl, "ts", tt.ts, -1)
			if sp.ErrorCode != 0 || sp.Offset != tt.wantOffset || sp.Timestamp != tt.wantTimestamp {
				t.Fatalf("error %d offset %d timestamp %d, want offset %d timestamp %d",
					sp.ErrorCode, sp.Offset, sp.Timestamp, tt.wantOffset, tt.wantTimestamp)
			}
			if (sp.Offset >= 0) != (sp.LeaderEpoch >= 0) {
				t.Fatalf("leader epoch %d for offset %d", sp.LeaderEpoch, sp.Offset)
			}
		})
	}
	if sp := listOneOffset(t, cl, "ts", -1, 5); sp.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("newer current leader epoch: error %d", sp.ErrorCode)
	}
	if sp := listOneOffset(t, cl, "nope", -1, -1); sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: error %d", sp.ErrorCode)
	}
	// kadm's timestamp lookup goes through the same path.
	listed, err := adm.ListOffsetsAfterMilli(testCtx(t), ms+15, "ts")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := listed.Lookup("ts", 0); o.Err != nil || o.Offset != 2 {
		t.Fatalf("kadm lookup: %+v", o)
	}
}
