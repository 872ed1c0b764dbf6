package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchReq builds a one-partition Fetch at the version the client
// negotiates (v13+: by topic id).
func fetchReq(topic string, id [16]byte, offset int64, minBytes, maxWaitMillis int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MinBytes, req.MaxWaitMillis, req.MaxBytes = minBytes, maxWaitMillis, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchOne(t *testing.T, cl *kgo.Client, req *kmsg.FetchRequest) kmsg.FetchResponseTopicPartition {
	t.Helper()
	resp := direct(t, cl, req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Fatalf("fetch: top-level error %d, session %d", resp.ErrorCode, resp.SessionID)
	}
	return resp.Topics[0].Partitions[0]
}

// countRecords counts the records of the batches in a fetch answer.
func countRecords(t *testing.T, batches []byte) int {
	t.Helper()
	n := 0
	for len(batches) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(batches); err != nil {
			t.Fatalf("fetched batches do not parse: %v", err)
		}
		n += int(rb.NumRecords)
		batches = batches[12+int(rb.Length):]
	}
	return n
}

func TestFetchLongPollReturnsWhenDataArrives(t *testing.T) {
	b, adm, cl := dataPathBroker(t)
	id := createTopic(t, adm, "poll", 1, nil)
	producer := newClient(t, b)
	produceAll(t, producer, testRecords("poll", 3))

	// Nothing at offset 3 yet: a fetch that may wait a minute must answer
	// as soon as a record arrives (the test's own deadline is shorter).
	done := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() { done <- fetchOne(t, cl, fetchReq("poll", id, 3, 1, 60_000)) }()
	select {
	case sp := <-done:
		t.Fatalf("answered without data: %+v", sp)
	case <-time.After(300 * time.Millisecond):
	}
	produceAll(t, producer, testRecords("poll", 1))
	select {
	case sp := <-done:
		if sp.ErrorCode != 0 || sp.HighWatermark != 4 || countRecords(t, sp.RecordBatches) != 1 {
			t.Fatalf("woken fetch: error %d hw %d records %d", sp.ErrorCode, sp.HighWatermark, countRecords(t, sp.RecordBatches))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("long poll not woken by the produce")
	}
}

func TestFetchAnswers(t *testing.T) {
	b, adm, cl := dataPathBroker(t)
	id := createTopic(t, adm, "f", 1, nil)
	produceAll(t, newClient(t, b), testRecords("f", 10))
	t.Run("from start", func(t *testing.T) {
		sp := fetchOne(t, cl, fetchReq("f", id, 0, 1, 0))
		if sp.ErrorCode != 0 || sp.HighWatermark != 10 || sp.LastStableOffset != 10 || sp.LogStartOffset != 0 ||
			countRecords(t, sp.RecordBatches) != 10 {
			t.Fatalf("%+v", sp)
		}
	})
	t.Run("at HW times out empty", func(t *testing.T) {
		sp := fetchOne(t, cl, fetchReq("f", id, 10, 1, 100))
		if sp.ErrorCode != 0 || len(sp.RecordBatches) != 0 || sp.HighWatermark != 10 {
			t.Fatalf("%+v", sp)
		}
	})
	t.Run("past LEO", func(t *testing.T) {
		if sp := fetchOne(t, cl, fetchReq("f", id, 11, 1, 0)); sp.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Fatalf("error %d", sp.ErrorCode)
		}
	})
	t.Run("unknown topic id", func(t *testing.T) {
		if sp := fetchOne(t, cl, fetchReq("", [16]byte{1, 2, 3}, 0, 1, 5000)); sp.ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("error %d", sp.ErrorCode)
		}
	})
	t.Run("current leader epoch", func(t *testing.T) {
		for epoch, want := range map[int32]int16{-1: 0, 0: 0, 1: kerr.UnknownLeaderEpoch.Code} {
			req := fetchReq("f", id, 0, 1, 0)
			req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch
			if sp := fetchOne(t, cl, req); sp.ErrorCode != want {
				t.Fatalf("epoch %d: error %d, want %d", epoch, sp.ErrorCode, want)
			}
		}
	})
	t.Run("by name below v13", func(t *testing.T) {
		for _, version := range []int16{4, 12} {
			req := fetchReq("f", [16]byte{}, 5, 1, 0)
			req.Version = version // a client would negotiate v13+
			wc := dialWire(t, b)
			wc.send(req, 1)
			_, body, err := wc.recv(version >= 12)
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = version
			if err == nil {
				err = resp.ReadFrom(body)
			}
			if err != nil || resp.Topics[0].Topic != "f" || resp.Topics[0].Partitions[0].ErrorCode != 0 ||
				countRecords(t, resp.Topics[0].Partitions[0].RecordBatches) < 5 {
				t.Fatalf("v%d fetch: %v %+v", version, err, resp)
			}
		}
	})
	t.Run("session id never issued", func(t *testing.T) {
		req := fetchReq("f", id, 0, 1, 0)
		req.SessionID, req.SessionEpoch = 77, 1
		resp := direct(t, cl, req).(*kmsg.FetchResponse)
		if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("error %d", resp.ErrorCode)
		}
	})
}
