package broker

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata"
)

// fetchReq builds a one-partition Fetch at the version the client
// negotiates (v13+: by topic id).
func newFetchReq(topic string, id [16]byte, offset int64, minBytes, maxWaitMillis int32) *kmsg.FetchRequest {
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

func fetchOnePartition(t *testing.T, cl *kgo.Client, req *kmsg.FetchRequest) kmsg.FetchResponseTopicPartition {
	t.Helper()
	resp := requestDirect(t, cl, req).(*kmsg.FetchResponse)
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
	id := createDataTopic(t, adm, "poll", 1, nil)
	producer := newDataClient(t, b)
	produceSyncAll(t, producer, makeTestRecords("poll", 3))

	// Nothing at offset 3 yet: a fetch that may wait a minute must answer
	// as soon as a record arrives (the test's own deadline is shorter).
	done := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() { done <- fetchOnePartition(t, cl, newFetchReq("poll", id, 3, 1, 60_000)) }()
	select {
	case sp := <-done:
		t.Fatalf("answered without data: %+v", sp)
	case <-time.After(300 * time.Millisecond):
	}
	produceSyncAll(t, producer, makeTestRecords("poll", 1))
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
	id := createDataTopic(t, adm, "f", 1, nil)
	produceSyncAll(t, newDataClient(t, b), makeTestRecords("f", 10))
	t.Run("from start", func(t *testing.T) {
		sp := fetchOnePartition(t, cl, newFetchReq("f", id, 0, 1, 0))
		if sp.ErrorCode != 0 || sp.HighWatermark != 10 || sp.LastStableOffset != 10 || sp.LogStartOffset != 0 ||
			countRecords(t, sp.RecordBatches) != 10 {
			t.Fatalf("%+v", sp)
		}
	})
	t.Run("at HW times out empty", func(t *testing.T) {
		sp := fetchOnePartition(t, cl, newFetchReq("f", id, 10, 1, 100))
		if sp.ErrorCode != 0 || len(sp.RecordBatches) != 0 || sp.HighWatermark != 10 {
			t.Fatalf("%+v", sp)
		}
	})
	t.Run("past LEO", func(t *testing.T) {
		if sp := fetchOnePartition(t, cl, newFetchReq("f", id, 11, 1, 0)); sp.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Fatalf("error %d", sp.ErrorCode)
		}
	})
	t.Run("unknown topic id", func(t *testing.T) {
		if sp := fetchOnePartition(t, cl, newFetchReq("", [16]byte{1, 2, 3}, 0, 1, 5000)); sp.ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("error %d", sp.ErrorCode)
		}
	})
	t.Run("current leader epoch", func(t *testing.T) {
		e := raiseLeaderEpoch(t, b, "f", metadata.TopicID(id))
		for epoch, want := range map[int32]int16{-1: 0, e - 1: kerr.FencedLeaderEpoch.Code, e: 0, e + 1: kerr.UnknownLeaderEpoch.Code} {
			req := newFetchReq("f", id, 0, 1, 0)
			req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch
			if sp := fetchOnePartition(t, cl, req); sp.ErrorCode != want {
				t.Fatalf("epoch %d: error %d, want %d", epoch, sp.ErrorCode, want)
			}
		}
	})
	t.Run("by name below v13", func(t *testing.T) {
		for _, version := range []int16{4, 12} {
			req := newFetchReq("f", [16]byte{}, 5, 1, 0)
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
		req := newFetchReq("f", id, 0, 1, 0)
		req.SessionID, req.SessionEpoch = 77, 1
		resp := requestDirect(t, cl, req).(*kmsg.FetchResponse)
		if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("error %d", resp.ErrorCode)
		}
	})
}

func TestFetchLimitsOnRealLog(t *testing.T) {
	b, adm, cl := dataPathBroker(t)
	id := createDataTopic(t, adm, "big", 2, nil)
	batch := buildBatch(batchSpec{records: 1, valueSize: 2000, timestamp: 1})
	for p := range int32(2) {
		for range 3 {
			wc := dialWire(t, b)
			req := newProduceReq("big", -1, 10000, bytes.Clone(batch))
			req.Topics[0].Partitions[0].Partition = p
			wc.send(req, 1)
			if _, _, err := wc.recv(true); err != nil {
				t.Fatal(err)
			}
		}
	}
	req := newFetchReq("big", id, 0, 1, 0)
	second := req.Topics[0].Partitions[0]
	second.Partition = 1
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, second)
	req.Topics[0].Partitions[0].PartitionMaxBytes = 100
	req.Topics[0].Partitions[1].PartitionMaxBytes = 100
	req.MaxBytes = 5000
	resp := requestDirect(t, cl, req).(*kmsg.FetchResponse)
	parts := resp.Topics[0].Partitions
	// KIP-74: the first partition returns its first batch although it is
	// larger than both limits; the second may not exceed its own.
	if len(parts[0].RecordBatches) != len(batch) || len(parts[1].RecordBatches) != 0 {
		t.Fatalf("partition max bytes 100: got %d and %d bytes, want %d and 0",
			len(parts[0].RecordBatches), len(parts[1].RecordBatches), len(batch))
	}
	req.Topics[0].Partitions[0].PartitionMaxBytes = 1 << 20
	req.Topics[0].Partitions[1].PartitionMaxBytes = 1 << 20
	resp = requestDirect(t, cl, req).(*kmsg.FetchResponse)
	parts = resp.Topics[0].Partitions
	// max bytes 5000 holds two whole batches of the first partition.
	if len(parts[0].RecordBatches) != 2*len(batch) || len(parts[1].RecordBatches) != 0 {
		t.Fatalf("max bytes 5000: got %d and %d bytes, want %d and 0",
			len(parts[0].RecordBatches), len(parts[1].RecordBatches), 2*len(batch))
	}
}
