package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOffsetForLeaderEpoch(t *testing.T) {
	b, adm, cl := dataPathBroker(t)
	createDataTopic(t, adm, "ep", 1, nil)
	createDataTopic(t, adm, "empty", 1, nil)
	produceSyncAll(t, newDataClient(t, b), makeTestRecords("ep", 6))
	ask := func(topic string, epoch, current int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.LeaderEpoch, rp.CurrentLeaderEpoch = epoch, current
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return requestDirect(t, cl, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	e := leaderEpochOf(t, b, "ep")
	if sp := ask("ep", e, -1); sp.ErrorCode != 0 || sp.LeaderEpoch != e || sp.EndOffset != 6 {
		t.Fatalf("current epoch: %+v", sp)
	}
	if sp := ask("empty", e, e); sp.ErrorCode != 0 || sp.LeaderEpoch != e || sp.EndOffset != 0 {
		t.Fatalf("current epoch of an empty log: %+v", sp)
	}
	if sp := ask("ep", e+3, e); sp.ErrorCode != 0 || sp.LeaderEpoch != -1 || sp.EndOffset != -1 {
		t.Fatalf("an epoch newer than any known is undefined, as in Kafka: %+v", sp)
	}
	if sp := ask("ep", e, e+1); sp.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("newer current leader epoch: %+v", sp)
	}
	if sp := ask("nope", 0, -1); sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", sp)
	}
}
