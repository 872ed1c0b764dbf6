package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/recordbatch"
)

// Issue 9 acceptance: a corpus of malformed requests (huge array counts,
// negative lengths, truncated frames, compression bombs) sent to the real
// binary for a while, with a well-behaved franz-go client producing and
// consuming throughout: no panic in the broker's log, the broker's RSS
// (/proc/<pid>/status VmRSS) stays under maxBarrageRSS, and the client never
// stalls.

const (
	// maxBarrageRSS bounds the broker's resident memory during the barrage.
	maxBarrageRSS = 1 << 30
	// barrageDuration is how long the corpus is replayed.
	barrageDuration = 15 * time.Second
	// bombBytes is what a compression bomb inflates to: past the broker's
	// 64 MiB cap on decompressed records (broker/batches.go).
	bombBytes = 100 << 20
)

func TestMalformedRequestCorpus(t *testing.T) {
	// No GOMEMLIMIT: the broker itself must bound what decoding costs
	// (decoded requests can be ~70x their frames; conn.go charges the
	// queued-bytes budget for it).
	b := StartBroker(t, withArgs("--auto-create-topics=false"))
	adm := b.Admin()
	createTopic(t, adm, "corpus-good", 1, nil)
	createTopic(t, adm, "corpus-compact", 1, map[string]string{"cleanup.policy": "compact"})
	corpus := malformedCorpus(t)

	rss := watchRSS(t, b.proc.Pid())
	client := startSteadyClient(t, b, "corpus-good")
	ctx, cancel := context.WithTimeout(context.Background(), barrageDuration)
	defer cancel()
	var wg sync.WaitGroup
	var sent atomic.Int64
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i++ {
				c := corpus[i%len(corpus)]
				sendCorpusEntry(b.Addr, c)
				sent.Add(1)
			}
		}()
	}
	bombs := checkBombsRefused(t, b, ctx)
	wg.Wait()
	produced, maxGap := client.stop(t)
	peak := rss.stop()
	t.Logf("%d malformed requests and %d compression bombs sent; peak broker RSS %d MiB; well-behaved client produced %d records, longest wait %v",
		sent.Load(), bombs, peak>>20, produced, maxGap.Round(time.Millisecond))

	if b.hasExited() {
		t.Fatalf("broker died during the barrage: %v", b.exitErr())
	}
	if strings.Contains(b.Log(), "panic") {
		t.Errorf("the broker's log shows a panic:\n%s", testkit.Tail(b.Log(), 4000))
	}
	if peak >= maxBarrageRSS {
		t.Errorf("broker RSS peaked at %d MiB, want under %d MiB", peak>>20, maxBarrageRSS>>20)
	}
	if produced < 10 || maxGap > 10*time.Second {
		t.Errorf("well-behaved client produced %d records with a longest wait of %v during the barrage", produced, maxGap)
	}
}

// corpusEntry is one malformed input: bytes written on a fresh connection.
// truncated entries stop early and close, as a client that dies mid-frame.
type corpusEntry struct {
	name string
	data []byte
}

// framed prefixes body with its int32 length.
func framed(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// header is a v1 request header (key, version, correlation id, client id).
func header(key, version int16, clientID string) []byte {
	h := binary.BigEndian.AppendUint16(nil, uint16(key))
	h = binary.BigEndian.AppendUint16(h, uint16(version))
	h = binary.BigEndian.AppendUint32(h, 1)
	h = binary.BigEndian.AppendUint16(h, uint16(len(clientID)))
	return append(h, clientID...)
}

func malformedCorpus(t *testing.T) []corpusEntry {
	t.Helper()
	var c []corpusEntry
	add := func(name string, data []byte) { c = append(c, corpusEntry{name, data}) }
	// Framing: negative, zero and tiny lengths; a frame cut short.
	add("negative frame length", []byte{0xff, 0xff, 0xff, 0xfe, 0, 3, 0, 1})
	add("zero frame length", []byte{0, 0, 0, 0})
	add("frame shorter than a header", framed([]byte{0, 3}))
	add("truncated frame", append(binary.BigEndian.AppendUint32(nil, 4096), header(3, 4, "x")...))
	add("max frame length announced", binary.BigEndian.AppendUint32(nil, 0x7fffffff))
	// Header: negative client id length other than null.
	add("negative client id length", framed(append(header(18, 2, "")[:8], 0xff, 0xf0)))
	// Huge array counts in non-flexible and flexible bodies.
	produce := append(header(0, 7, "bad"), 0xff, 0xff, 0, 1, 0, 0, 0x75, 0x30) // null txn id, acks 1, timeout
	add("produce with 2^31-1 topics", framed(append(produce, 0x7f, 0xff, 0xff, 0xff)))
	add("produce with -2 topics", framed(append(produce, 0xff, 0xff, 0xff, 0xfe)))
	meta := append(header(3, 12, "bad"), 0) // flexible header: empty tag buffer
	add("metadata with a huge compact array", framed(append(meta, 0xff, 0xff, 0xff, 0xff, 0x07)))
	add("metadata with a huge varint", framed(append(meta, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)))
	// Negative lengths inside: a topic name and a records field.
	one := binary.BigEndian.AppendUint32(append([]byte(nil), produce...), 1)
	add("negative topic name length", framed(append(one, 0xff, 0xf0)))
	rec := binary.BigEndian.AppendUint16(append([]byte(nil), one...), 1)
	rec = append(rec, 't')
	rec = binary.BigEndian.AppendUint32(rec, 1) // one partition
	rec = binary.BigEndian.AppendUint32(rec, 0) // partition 0
	add("negative records length", framed(binary.BigEndian.AppendUint32(rec, 0xfffffff0)))
	add("records length past the frame", framed(binary.BigEndian.AppendUint32(rec, 1<<30)))
	// Many small elements: the decoded form is larger than the wire form.
	add("produce with 1M empty topics", manyTopicsProduce())
	return c
}

// manyTopicsProduce is a syntactically valid Produce v7 naming 1M empty
// topics (2 bytes of name and 4 of partition count each, 6 MiB in all).
func manyTopicsProduce() []byte {
	const n = 1 << 20
	body := append(header(0, 7, "many"), 0xff, 0xff, 0, 1, 0, 0, 0x75, 0x30)
	body = binary.BigEndian.AppendUint32(body, n)
	body = append(body, bytes.Repeat([]byte{0, 0, 0, 0, 0, 0}, n)...)
	return framed(body)
}

// sendCorpusEntry writes one entry on a fresh connection and reads until
// the broker answers or closes (bounded wait).
func sendCorpusEntry(addr string, c corpusEntry) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(c.data); err != nil {
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.CloseWrite() // a truncated frame ends here
	}
	_, _ = io.Copy(io.Discard, conn)
}

// checkBombsRefused sends compression bombs to a compacted topic (where the
// broker decompresses to check keys) until ctx ends: each must be refused.
func checkBombsRefused(t *testing.T, b *Broker, ctx context.Context) int {
	t.Helper()
	bombs := [][]byte{compressionBomb(t, 4), compressionBomb(t, 1)} // zstd, gzip
	cl := b.Client(kgo.RequestTimeoutOverhead(30 * time.Second))
	n := 0
	for ; ctx.Err() == nil; n++ {
		err := rawProduceCtx(t, cl, "corpus-compact", bombs[n%len(bombs)])
		if err == nil {
			t.Fatalf("a compression bomb inflating to %d MiB was accepted", bombBytes>>20)
		}
		if !errors.Is(err, kerr.CorruptMessage) && !errors.Is(err, kerr.InvalidRecord) && !errors.Is(err, kerr.RecordListTooLarge) {
			t.Errorf("compression bomb: %v, want CORRUPT_MESSAGE, INVALID_RECORD or RECORD_LIST_TOO_LARGE", err)
		}
	}
	return n
}

// rawProduceCtx is rawProduce without t.Fatal on transport errors (which
// count as refusals only if the broker lives).
func rawProduceCtx(t *testing.T, cl *kgo.Client, topic string, batch []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce request: %v", err)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// compressionBomb is a RecordBatch v2 (codec 4 zstd or 1 gzip) of one
// keyed record whose value is bombBytes zeros: kilobytes on the wire.
func compressionBomb(t *testing.T, codec int16) []byte {
	t.Helper()
	body := []byte{0}                   // record attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, 0) // offset delta
	body = binary.AppendVarint(body, 1) // key length
	body = append(body, 'k')
	body = binary.AppendVarint(body, bombBytes)
	recordLen := len(body) + bombBytes + 1 // + header count
	var raw bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case 4:
		enc, err := zstd.NewWriter(&raw, zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			t.Fatal(err)
		}
		w = enc
	default:
		w, _ = gzip.NewWriterLevel(&raw, gzip.BestCompression)
	}
	bw := bufio.NewWriter(w)
	_, _ = bw.Write(binary.AppendVarint(nil, int64(recordLen)))
	_, _ = bw.Write(body)
	zeros := make([]byte, 1<<20)
	for i := 0; i < bombBytes>>20; i++ {
		_, _ = bw.Write(zeros)
	}
	_, _ = bw.Write(binary.AppendVarint(nil, 0)) // no headers
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	batch := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: codec,
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1, Records: raw.Bytes()}
	batch.Length = int32(49 + raw.Len())
	out := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], recordbatch.Checksum(out[21:]))
	return out
}

// rssWatch samples a process's VmRSS every 50 ms.
type rssWatch struct {
	stopOnce sync.Once
	done     chan struct{}
	finished chan struct{}
	peak     atomic.Int64
}

func watchRSS(t *testing.T, pid int) *rssWatch {
	w := &rssWatch{done: make(chan struct{}), finished: make(chan struct{})}
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	go func() {
		defer close(w.finished)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if kb, err := vmRSS(path); err == nil && kb<<10 > w.peak.Load() {
				w.peak.Store(kb << 10)
			}
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends sampling and returns the peak in bytes.
func (w *rssWatch) stop() int64 {
	w.stopOnce.Do(func() { close(w.done) })
	<-w.finished
	return w.peak.Load()
}

func vmRSS(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in %s", path)
}

// steadyClient produces one record at a time to a topic and consumes it
// back, recording the longest wait for an acknowledgement.
type steadyClient struct {
	cancel   context.CancelFunc
	done     chan struct{}
	consumer *kgo.Client
	produced atomic.Int64
	consumed atomic.Int64
	maxGap   atomic.Int64 // nanoseconds
	err      atomic.Value
}

func startSteadyClient(t *testing.T, b *Broker, topic string) *steadyClient {
	ctx, cancel := context.WithCancel(context.Background())
	s := &steadyClient{cancel: cancel, done: make(chan struct{})}
	cl := b.Client()
	s.consumer = b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	go func() {
		for ctx.Err() == nil {
			fetches := s.consumer.PollFetches(ctx)
			s.consumed.Add(int64(fetches.NumRecords()))
		}
	}()
	go func() {
		defer close(s.done)
		last := time.Now()
		for i := 0; ctx.Err() == nil; i++ {
			pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
			err := cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}).FirstErr()
			pcancel()
			if err != nil {
				if ctx.Err() == nil {
					s.err.Store(err)
				}
				return
			}
			s.produced.Add(1)
			now := time.Now()
			if gap := now.Sub(last); int64(gap) > s.maxGap.Load() {
				s.maxGap.Store(int64(gap))
			}
			last = now
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return s
}

// stop checks that the consumer kept up (it has read every acknowledged
// record but the last few), then ends producing and consuming.
func (s *steadyClient) stop(t *testing.T) (int64, time.Duration) {
	t.Helper()
	produced := s.produced.Load()
	for deadline := time.Now().Add(30 * time.Second); s.consumed.Load() < produced-5 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if consumed := s.consumed.Load(); consumed < produced-5 {
		t.Errorf("well-behaved consumer read %d of %d acknowledged records", consumed, produced)
	}
	s.cancel()
	<-s.done
	if err, _ := s.err.Load().(error); err != nil {
		t.Errorf("well-behaved producer failed during the barrage: %v", err)
	}
	return s.produced.Load(), time.Duration(s.maxGap.Load())
}
