package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker answers one Fetch read from c: it checks the request frame
// decodes as a Fetch of version, then writes resp (with a tagged-field
// section holding one tag when the version is flexible) under the
// request's correlation id plus corrDelta.
func fakeBroker(t *testing.T, c net.Conn, version int16, resp *kmsg.FetchResponse, corrDelta int32) {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Errorf("reading request size: %v", err)
		return
	}
	req := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, req); err != nil {
		t.Errorf("reading request: %v", err)
		return
	}
	if key, v := int16(binary.BigEndian.Uint16(req)), int16(binary.BigEndian.Uint16(req[2:])); key != 1 || v != version {
		t.Errorf("request key %d version %d, want 1 and %d", key, v, version)
	}
	corr := int32(binary.BigEndian.Uint32(req[4:])) + corrDelta
	body := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if version >= firstFlexibleFetch {
		body = append(body, 1, 7, 2, 0xAA, 0xBB) // one tag (7) of 2 bytes
	}
	resp.SetVersion(version)
	body = resp.AppendTo(body)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := c.Write(append(frame, body...)); err != nil {
		t.Errorf("writing response: %v", err)
	}
}

func fetchResponse(batches []byte) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition, rp.HighWatermark, rp.RecordBatches = 3, 42, batches
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	return resp
}

// TestRawConnFetch: a response is parsed (flexible header tags skipped,
// record batches returned as sent), in both header formats, and the
// buffer is reused across fetches.
func TestRawConnFetch(t *testing.T) {
	for _, version := range []int16{11, 12} {
		client, server := net.Pipe()
		c := &rawConn{conn: client, format: kmsg.NewRequestFormatter(), version: version}
		batches := bytes.Repeat([]byte{0x5A}, 1000)
		var prev []byte
		for i := range 2 {
			go fakeBroker(t, server, version, fetchResponse(batches), 0)
			resp, err := c.fetch(context.Background(), fetchRequest(rawTopic{name: "t"}, map[int32]int64{3: 0}, 1<<20))
			if err != nil {
				t.Fatalf("v%d fetch %d: %v", version, i, err)
			}
			got := resp.Topics[0].Partitions[0]
			if got.Partition != 3 || got.HighWatermark != 42 || !bytes.Equal(got.RecordBatches, batches) {
				t.Fatalf("v%d fetch %d: partition %d hw %d, %d batch bytes", version, i, got.Partition, got.HighWatermark, len(got.RecordBatches))
			}
			if prev != nil && &prev[0] != &got.RecordBatches[0] {
				t.Errorf("v%d: second response not read into the same buffer", version)
			}
			prev = got.RecordBatches
		}
		client.Close()
		server.Close()
	}
}

// TestRawConnRejects: a wrong correlation id, an oversized frame and
// torn tag sections are errors, not panics or huge allocations.
func TestRawConnRejects(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	c := &rawConn{conn: client, format: kmsg.NewRequestFormatter(), version: 12}
	go fakeBroker(t, server, 12, fetchResponse(nil), 1)
	if _, err := c.fetch(context.Background(), fetchRequest(rawTopic{name: "t"}, map[int32]int64{0: 0}, 1)); !errors.Is(err, errRawFrame) {
		t.Fatalf("wrong correlation id: %v, want errRawFrame", err)
	}

	client2, server2 := net.Pipe()
	defer client2.Close()
	defer server2.Close()
	c2 := &rawConn{conn: client2, version: 12}
	go func() { _, _ = server2.Write([]byte{0x7F, 0xFF, 0xFF, 0xFF}) }()
	if _, err := c2.readFrame(); !errors.Is(err, errRawFrame) {
		t.Fatalf("2 GiB frame: %v, want errRawFrame", err)
	}

	for _, b := range [][]byte{{}, {0x80}, {1}, {1, 7}, {1, 7, 5, 0}, {2, 7, 0}} {
		if _, err := skipTags(b); !errors.Is(err, errRawFrame) {
			t.Errorf("skipTags(%x): %v, want errRawFrame", b, err)
		}
	}
	if rest, err := skipTags([]byte{1, 7, 1, 9, 0xEE}); err != nil || !bytes.Equal(rest, []byte{0xEE}) {
		t.Errorf("skipTags of one tag: rest %x, %v", rest, err)
	}
}
