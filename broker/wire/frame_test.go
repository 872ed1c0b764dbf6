package wire

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParseRequestHeader(t *testing.T) {
	cases := []struct {
		name     string
		frame    []byte
		flexible bool
		want     RequestHeader
		body     []byte
		err      error
	}{
		{name: "v1 with client id",
			frame: []byte{0, 3, 0, 5, 0, 0, 1, 0, 0, 2, 'i', 'd', 0xaa},
			want:  RequestHeader{APIKey: 3, Version: 5, CorrelationID: 256, ClientID: "id"}, body: []byte{0xaa}},
		{name: "v1 null client id",
			frame: []byte{0, 18, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			want:  RequestHeader{APIKey: 18, CorrelationID: -1}, body: []byte{}},
		{name: "v2 empty tags",
			frame: []byte{0, 3, 0, 12, 0, 0, 0, 9, 0, 1, 'c', 0, 0xbb}, flexible: true,
			want: RequestHeader{APIKey: 3, Version: 12, CorrelationID: 9, ClientID: "c"}, body: []byte{0xbb}},
		{name: "v2 two tags skipped",
			frame: []byte{0, 3, 0, 12, 0, 0, 0, 9, 0xff, 0xff, 2, 0, 1, 0x77, 5, 2, 1, 2, 0xcc}, flexible: true,
			want: RequestHeader{APIKey: 3, Version: 12, CorrelationID: 9}, body: []byte{0xcc}},
		{name: "client id past end", frame: []byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 9, 'a'}, err: ErrMalformedHeader},
		{name: "negative client id length", frame: []byte{0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xfe}, err: ErrMalformedHeader},
		{name: "tag size past end", frame: []byte{0, 3, 0, 12, 0, 0, 0, 9, 0xff, 0xff, 1, 0, 9, 1}, flexible: true, err: ErrMalformedHeader},
		{name: "tag count past end", frame: []byte{0, 3, 0, 12, 0, 0, 0, 9, 0xff, 0xff, 0x7f}, flexible: true, err: ErrMalformedHeader},
		{name: "missing tags", frame: []byte{0, 3, 0, 12, 0, 0, 0, 9, 0xff, 0xff}, flexible: true, err: ErrMalformedHeader},
		{name: "too short", frame: []byte{0, 3, 0}, err: ErrFrameTooSmall},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr, body, err := ParseRequestHeader(tc.frame, tc.flexible)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || hdr != tc.want || !bytes.Equal(body, tc.body) {
				t.Fatalf("got %+v %x %v, want %+v %x", hdr, body, err, tc.want, tc.body)
			}
		})
	}
}

func TestReadFrameChecksSizeBeforeReading(t *testing.T) {
	// Only the size prefix is present: a frame over the limit must fail on
	// the prefix alone, not by trying to read (or allocate) 2 GiB.
	_, err := ReadFrame(bytes.NewReader([]byte{0x7f, 0xff, 0xff, 0xff}), 1<<20)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err %v, want ErrFrameTooLarge", err)
	}
	_, err = ReadFrame(bytes.NewReader([]byte{0, 0, 0, 9}), 1<<20)
	if !errors.Is(err, ErrFrameTooSmall) {
		t.Fatalf("err %v, want ErrFrameTooSmall", err)
	}
	frame, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), 10)
	if err != nil || len(frame) != 10 {
		t.Fatalf("frame %x err %v", frame, err)
	}
}

func TestResponseHeaderFlexibility(t *testing.T) {
	md := kmsg.NewPtrMetadataResponse()
	md.Version = 12
	flex := AppendResponseFrame(nil, 5, md)
	md.Version = 8
	plain := AppendResponseFrame(nil, 5, md)
	av := kmsg.NewPtrApiVersionsResponse()
	av.Version = 4
	api := AppendResponseFrame(nil, 5, av)
	if flex[8] != 0 || len(api) != 4+4+len(av.AppendTo(nil)) || len(plain) != 4+4+len(md.AppendTo(nil)) {
		t.Fatalf("flexible header byte missing or ApiVersions header not v0: %x / %x", flex[:9], api)
	}
}

// TestResponseSizeHintCoversFetch: a fetch response frame is encoded into
// the hinted buffer without growing it (one allocation per response).
func TestResponseSizeHintCoversFetch(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	for ti := 0; ti < 3; ti++ {
		topic := kmsg.NewFetchResponseTopic()
		topic.Topic = fmt.Sprintf("topic-%d", ti)
		for pi := 0; pi < 4; pi++ {
			part := kmsg.NewFetchResponseTopicPartition()
			part.Partition = int32(pi)
			part.RecordBatches = make([]byte, 100_000*(pi+1))
			for a := 0; a < pi; a++ {
				part.AbortedTransactions = append(part.AbortedTransactions, kmsg.NewFetchResponseTopicPartitionAbortedTransaction())
			}
			topic.Partitions = append(topic.Partitions, part)
		}
		resp.Topics = append(resp.Topics, topic)
	}
	hint := ResponseSizeHint(resp)
	frame := AppendResponseFrame(make([]byte, 0, hint), 7, resp)
	if cap(frame) != hint {
		t.Fatalf("frame buffer grew from %d to %d bytes (encoded %d)", hint, cap(frame), len(frame))
	}
	if len(frame) < 1_200_000 {
		t.Fatalf("encoded frame is %d bytes, want the record batches in it", len(frame))
	}
}
