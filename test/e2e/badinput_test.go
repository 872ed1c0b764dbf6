package e2e

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	mathrand "math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-log/strata/recordbatch"
)

// rawBatch encodes an uncompressed RecordBatch v2 holding values, with a
// correct CRC-32C unless corruptCRC.
func rawBatch(corruptCRC bool, values ...string) []byte {
	now := time.Now().UnixMilli()
	var records []byte
	for i, v := range values {
		rec := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		body := rec.AppendTo(nil)[1:] // drop the 1-byte varint of Length 0
		rec.Length = int32(len(body))
		records = rec.AppendTo(records)
	}
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2,
		LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp:  now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(values)), Records: records,
	}
	batch.Length = int32(49 + len(records))
	raw := batch.AppendTo(nil)
	crc := recordbatch.Checksum(raw[21:])
	if corruptCRC {
		crc ^= 0xdeadbeef
	}
	binary.BigEndian.PutUint32(raw[17:], crc)
	return raw
}

// rawProduce sends one acks=-1 Produce of batch to topic/partition and
// returns the partition's error (nil for success).
func rawProduce(t testing.TB, cl *kgo.Client, topic string, partition int32, batch []byte) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce request: %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce: want one partition in the response, got %+v", resp.Topics)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// TestBadInput: each kind of bad input gets Kafka's answer and the broker
// keeps serving.
func TestBadInput(t *testing.T) {
	// Auto-creation off: a raw Produce to an unknown topic must be refused
	// whatever the broker's auto-create policy for Produce is.
	b := StartBroker(t, withArgs("--auto-create-topics=false"))
	adm := b.Admin()
	const topic = "bad-input"
	createTopic(t, adm, topic, 1, map[string]string{"max.message.bytes": "2048"})

	t.Run("oversized frame closes the connection", func(t *testing.T) { checkOversizedFrame(t, b) })

	// Produce v13+ names topics by id; pin Kafka 4.0's versions (Produce
	// v12, as librdkafka 2.x sends) so topics are named and an unknown name
	// has its own error code.
	cl := b.Client(kgo.MaxVersions(kversion.V4_0_0()))
	if err := rawProduce(t, cl, topic, 0, rawBatch(false, "good")); err != nil {
		t.Fatalf("control: a well-formed raw batch was refused: %v", err)
	}
	if err := rawProduce(t, cl, topic, 0, rawBatch(true, "bad crc")); !errors.Is(err, kerr.CorruptMessage) {
		t.Errorf("bad CRC: %v, want CORRUPT_MESSAGE", err)
	}
	if err := rawProduce(t, cl, "no-such-topic-e2e", 0, rawBatch(false, "x")); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("produce to unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if err := rawProduce(t, cl, topic, 7, rawBatch(false, "x")); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("produce to unknown partition 7: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if err := rawProduce(t, cl, topic, 0, rawBatch(false, strings.Repeat("L", 4000))); !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("raw 4 KB batch over max.message.bytes=2048: %v, want MESSAGE_TOO_LARGE", err)
	}

	if err := rawProduce(t, cl, topic, 0, rawMessageV1("old format")); !errors.Is(err, kerr.UnsupportedForMessageFormat) {
		t.Errorf("magic 1 message set: %v, want UNSUPPORTED_FOR_MESSAGE_FORMAT", err)
	}
	if p := fetchPartition(t, b, topic, 1000); !errors.Is(kerr.ErrorForCode(p.ErrorCode), kerr.OffsetOutOfRange) {
		t.Errorf("fetch at 1000 past the end: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(p.ErrorCode))
	}
	t.Run("unknown ApiVersions version gets the v0 fallback", func(t *testing.T) { checkApiVersionsFallback(t, b) })

	big := make([]byte, 4000)
	_, _ = rand.Read(big) // incompressible
	ctx := testCtx(t, 30*time.Second)
	err := b.Client(kgo.ProducerBatchCompression(kgo.NoCompression())).ProduceSync(ctx, &kgo.Record{Topic: topic, Value: big}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("kgo 4 KB record over max.message.bytes=2048: %v, want MESSAGE_TOO_LARGE", err)
	}

	for _, name := range []string{"bad/name", "has space", "..", strings.Repeat("n", 250)} {
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, name)
		if err == nil {
			err = resp.Err
		}
		if !errors.Is(err, kerr.InvalidTopicException) {
			t.Errorf("create topic %.20q: %v, want INVALID_TOPIC_EXCEPTION", name, err)
		}
	}

	// The good batch is still the only record: nothing bad was appended.
	if end := endOffsets(t, adm, topic)[0]; end != 1 {
		t.Errorf("end offset %d after one good and several bad produces, want 1", end)
	}
}

// checkOversizedFrame announces a 200 MiB request on a raw connection: the
// broker must close it without waiting for (or allocating) the body, and
// serve a new client afterwards.
func checkOversizedFrame(t *testing.T, b *Broker) {
	conn, err := net.DialTimeout("tcp", b.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 200<<20)
	if _, err := conn.Write(append(hdr[:], []byte("\x00\x12\x00\x03\x00\x00\x00\x01")...)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(make([]byte, 64))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open 10s after a 200 MiB frame header")
	}
	if err == nil || (err != io.EOF && !strings.Contains(err.Error(), "reset")) {
		t.Fatalf("after a 200 MiB frame header: read %d bytes, err %v; want the connection closed", n, err)
	}
	if b.hasExited() {
		t.Fatalf("broker died: %v", b.exitErr())
	}
	ctx := testCtx(t, 30*time.Second)
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, b.Client()); err != nil {
		t.Fatalf("new client after the oversized frame: %v", err)
	}
}

// rawMessageV1 encodes a one-message magic-1 message set (pre-0.11 format).
func rawMessageV1(value string) []byte {
	m := kmsg.MessageV1{Magic: 1, Timestamp: time.Now().UnixMilli(), Value: []byte(value)}
	m.MessageSize = int32(4 + 1 + 1 + 8 + 4 + 4 + len(value)) // crc, magic, attributes, timestamp, null key, value
	raw := m.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[12:], crc32.ChecksumIEEE(raw[16:]))
	return raw
}

// checkApiVersionsFallback sends ApiVersions v99 on a raw connection: the
// broker must answer in v0 with UNSUPPORTED_VERSION and its API list, as
// Kafka does, so that newer clients can retry at a version it knows.
func checkApiVersionsFallback(t *testing.T, b *Broker) {
	conn, err := net.DialTimeout("tcp", b.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 99
	req.ClientSoftwareName, req.ClientSoftwareVersion = "e2e", "1.0"
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e")).AppendRequest(nil, req, 7)); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("read response size: %v", err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 6 || n > 1<<20 {
		t.Fatalf("response size %d", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatalf("read response: %v", err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != 7 {
		t.Fatalf("correlation id %d, want 7", corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatalf("decode v0 ApiVersions response: %v", err)
	}
	if !errors.Is(kerr.ErrorForCode(resp.ErrorCode), kerr.UnsupportedVersion) {
		t.Fatalf("ApiVersions v99: error %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 18 && k.MaxVersion >= 3 {
			return
		}
	}
	t.Fatalf("v0 fallback lists no ApiVersions >= v3: %+v", resp.ApiKeys)
}

// TestMalformedRequests sends frames with valid API keys and versions but
// random bodies (a bounded, seeded batch): each gets an answer or a closed
// connection, and the broker keeps running and serving.
func TestMalformedRequests(t *testing.T) {
	b := StartBroker(t)
	createTopic(t, b.Admin(), "malformed", 1, nil)
	rng := mathrand.New(mathrand.NewPCG(2, 11))
	keys := []int16{0, 1, 2, 3, 18, 19, 20, 21, 23, 32, 33, 37, 44, 60}
	for i := 0; i < 300; i++ {
		key := keys[rng.IntN(len(keys))]
		version := int16(rng.IntN(int(kmsg.RequestForKey(key).MaxVersion()) + 1))
		var body []byte
		// Mutated CreateTopics/CreatePartitions can be valid requests for
		// up to 100,000 partitions: TestManyPartitionsKeepServing covers
		// that; here they get random bodies only.
		if i%2 == 0 || key == 19 || key == 37 {
			body = make([]byte, rng.IntN(200))
			for j := range body {
				body[j] = byte(rng.IntN(256))
			}
		} else {
			body = validBody(key, version)
			for flips := 1 + rng.IntN(3); flips > 0 && len(body) > 0; flips-- {
				body[rng.IntN(len(body))] ^= byte(1 + rng.IntN(255))
			}
		}
		sendRawFrame(t, b, key, version, body)
		if b.hasExited() {
			t.Fatalf("broker died on request %d (key %d v%d body %x): %v", i, key, version, body, b.exitErr())
		}
	}
	ctx := testCtx(t, 30*time.Second)
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, b.Client()); err != nil {
		t.Fatalf("broker not serving after malformed requests: %v", err)
	}
	produceSync(t, b.Client(), &kgo.Record{Topic: "malformed", Value: []byte("still fine")})
}

// validBody encodes a plausible request of key at version (a produce with a
// real batch, a fetch and list-offsets of a real topic, ...), to be mutated.
func validBody(key, version int16) []byte {
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		r.Acks, r.TimeoutMillis = -1, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "malformed"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = rawBatch(false, "a", "bb", "ccc")
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
	case *kmsg.FetchRequest:
		r.ReplicaID, r.MaxBytes, r.MaxWaitMillis = -1, 1<<20, 10
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "malformed"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
	case *kmsg.ListOffsetsRequest:
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "malformed"
		rt.Partitions = append(rt.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
		r.Topics = append(r.Topics, rt)
	case *kmsg.CreateTopicsRequest:
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "fuzzed", 2, 1
		r.Topics = append(r.Topics, rt)
	case *kmsg.MetadataRequest:
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("malformed")
		r.Topics = append(r.Topics, rt)
	}
	body := req.AppendTo(nil)
	if req.IsFlexible() {
		body = append([]byte{0}, body...) // the request header's empty tag buffer
	}
	return body
}

// sendRawFrame writes one request (header v1: key, version, correlation id,
// client id "e2e", then body) and reads until an answer or close, bounded
// by a deadline.
func sendRawFrame(t *testing.T, b *Broker, key, version int16, body []byte) {
	conn, err := net.DialTimeout("tcp", b.Addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = binary.BigEndian.AppendUint16(frame, uint16(key))
	frame = binary.BigEndian.AppendUint16(frame, uint16(version))
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint16(frame, 3)
	frame = append(frame, "e2e"...)
	frame = append(frame, body...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := conn.Write(frame); err != nil {
		return // already closed: an acceptable answer
	}
	_, _ = conn.Read(make([]byte, 4096))
}
