package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier/tiertest"
)

// Issue 7's acceptance for tiered compaction, against a real MinIO: the
// bucket is listed with minio-go and compared with the manifest read from
// etcd, independently of the broker's S3 client. The keyed model and the
// record generators are compaction_test.go's.

// TestCompactionTieredMinIO: 1,000,000 keyed records over 10,000 keys
// (5% of the keys then deleted by tombstones) go into 128 KiB segments
// with a 512 KiB local retention, so that once uploaded the hot log keeps
// only the tail and reads from offset 0 come from the bucket. The topic is
// produced with cleanup.policy=delete, so the bucket's objects can be
// measured before any cleaning, then switched to compact. While the leader
// rewrites the objects and swaps them in the manifest, two readers scan
// from offset 0 over and over with raw Fetch requests (1 MiB and 64 KiB a
// fetch): no fetch may fail, offsets only increase, every record is the
// one acknowledged at its offset, every scan holds every key's latest
// record, and an offset of the bucket-only range that a scan found
// compacted away never comes back. The readers stop at the first scan
// that finds the log compacted. After the
// 1s grace period the bucket holds exactly the objects the manifest names,
// fewer and smaller than before. Then delete.retention.ms drops to 1s and
// filler pushes the tombstones out of the hot log: the deleted keys
// disappear from the bucket too.
func TestCompactionTieredMinIO(t *testing.T) {
	testStart := time.Now()
	mio := tiertest.StartMinIO(t)
	b := startTieredBroker(t, mio, "--log-cleaner-backoff", "100ms", "--log-cleaner-object-delete-grace", "1s")
	// Small segments: about 200 objects, so a pass rewrites them in several
	// runs of at most 32 objects, each swapped on its own while the
	// readers scan.
	const (
		topic          = "tiercompact-1m"
		segmentBytes   = 128 << 10
		localRetention = 512 << 10
	)
	createTopic(t, b.Admin(), topic, 1, map[string]string{
		"cleanup.policy": "delete", "internal.segment.bytes": fmt.Sprint(segmentBytes),
		"local.retention.bytes": fmt.Sprint(localRetention), "min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "3600000",
	})
	m := newKeyedLog(millionGen)
	// As TestCompaction1MRecords: lz4 batches of about 3,900 records. The
	// hot log's dirty range is then a few hundred KB holding whole batches
	// of that many records, which the offset map must hold.
	p := &asyncProducer{m: m, cl: b.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(256<<10), kgo.MaxBufferedRecords(100_000), kgo.ProducerBatchCompression(kgo.Lz4Compression()))}
	start := time.Now()
	for seq := range millionRecords + millionDeleted {
		p.produce(topic, seq)
	}
	p.flush(t, 3*time.Minute)
	lastTombstone := m.view().end() - 1
	filler := fillerSeq
	p.rollPast(t, b, topic, lastTombstone, &filler)
	t.Logf("produced %d records + %d filler in %v", millionRecords+millionDeleted, filler-fillerSeq, time.Since(start).Round(time.Millisecond))
	testkit.WaitFor(t, 60*time.Second, "every sealed segment uploaded and the hot log trimmed to the tail", func() bool {
		time.Sleep(100 * time.Millisecond)
		return allSealedUploaded(t, b, topic, 1) && fetchCompactionStatus(t, b, topic).LocalStart > lastTombstone*9/10
	})
	before, _ := waitBucketMatchesManifest(t, mio, b, 10*time.Second)
	st := fetchCompactionStatus(t, b, topic)
	t.Logf("%v after producing: %d objects, %d bytes in the bucket, tiered [0, %d), hot log from %d",
		time.Since(start).Round(time.Millisecond), before.objects, before.bytes, st.TieredEnd, st.LocalStart)

	alterTopicConfig(t, b.Admin(), topic, "cleanup.policy", "compact")
	cleanStart := time.Now()
	view := m.view()
	results := runScanners(t, b, topic, view, true, st.LocalStart, 90*time.Second, 1<<20, 64<<10)
	took := time.Since(cleanStart)
	for i, rs := range results {
		t.Logf("reader %d: %s", i+1, describeScans(rs))
	}
	if st2 := fetchCompactionStatus(t, b, topic); st2.LocalStart != st.LocalStart {
		t.Fatalf("hot log start moved from %d to %d while cleaning (no data was produced)", st.LocalStart, st2.LocalStart)
	}
	view.waitConverged(t, b, topic, convergence{keepTombstones: true}, 30*time.Second)
	checkTieredCleaned(t, b, topic)
	after, wait := waitBucketMatchesManifest(t, mio, b, 30*time.Second)
	t.Logf("compacted %v after switching to compact (a scan saw it); bucket matches the manifest %v later: %d objects, %d bytes (were %d, %d)",
		took.Round(time.Millisecond), wait.Round(time.Millisecond), after.objects, after.bytes, before.objects, before.bytes)
	if after.objects >= before.objects || after.bytes >= before.bytes {
		t.Fatalf("bucket after cleaning: %d objects, %d bytes; before: %d objects, %d bytes", after.objects, after.bytes,
			before.objects, before.bytes)
	}

	// delete.retention.ms passes: once the tombstones are only in the
	// bucket (the hot copy keeps them while the bucket holds older
	// offsets), the next tiered pass drops them.
	alterTopicConfig(t, b.Admin(), topic, "delete.retention.ms", "1000")
	dropStart := time.Now()
	rollLocalStartPast(t, b, p, topic, lastTombstone, &filler)
	took = m.view().waitConverged(t, b, topic, convergence{}, 60*time.Second)
	final, _ := waitBucketMatchesManifest(t, mio, b, 30*time.Second)
	t.Logf("deleted keys gone %v after lowering delete.retention.ms (%v of filler); bucket %d objects, %d bytes; whole test %v",
		time.Since(dropStart).Round(time.Millisecond), (time.Since(dropStart) - took).Round(time.Millisecond),
		final.objects, final.bytes, time.Since(testStart).Round(time.Millisecond))
}

// describeScans summarizes one reader's scans.
func describeScans(rs []scanResult) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%d records/%d fetches/%v", r.records, r.fetches, r.took.Round(time.Millisecond)))
	}
	return fmt.Sprintf("%d scans [%s]", len(rs), strings.Join(parts, ", "))
}

// checkTieredCleaned: the broker reports tiered cleaning that shrank the
// bucket's copy.
func checkTieredCleaned(t testing.TB, b *Broker, topic string) {
	t.Helper()
	st := fetchCompactionStatus(t, b, topic)
	if !st.Compacted || st.CleanedTieredEnd <= 0 || st.CleanerPasses == 0 || st.CleanedBytesOut >= st.CleanedBytesIn {
		t.Fatalf("tier status after cleaning: %+v", st)
	}
	if n := logCount(b, "msg=\"cleaned tiered objects\"", false); n == 0 {
		t.Fatalf("no tiered cleaning pass logged")
	}
}

// TestCompactionTieredSurvivesKill9: TestCompactionSurvivesKill9 with the
// partition tiered to MinIO. Versions of 1,000 keys (some tombstones) go
// into 16 KiB segments with a 16 KiB local retention (less than the
// cleaned log), so nearly all of the log is in the bucket, where the
// leader keeps rewriting and swapping objects (1s grace before old
// objects go). The offset map (64 KiB, 2,457 keys) holds every key: the
// tiered checkpoint lives in memory, so after each restart the leader
// cleans the whole bucket again from offset 0, and with a map smaller than
// the key set that takes a pass per few hundred records, each rewriting
// every object (minutes for this test's 75,000 records;
// TestCompactionSurvivesKill9 covers multi-pass cleaning of the hot
// log). The broker is killed with SIGKILL at random moments 20 times.
// After each restart, reading from offset 0 (mostly from the bucket) finds
// every key live at the kill with its latest value (or a newer record),
// each record as acknowledged at its offset, and offsets increasing. At the
// end, with the keyed data pushed out of the hot log, the bucket's copy is
// cleaned to exactly the latest value per live key (cleaning resumed), and
// the orphan sweeper (2s grace) and the delete queue leave exactly the
// objects the manifest names: new objects of passes cut by a kill and old
// objects whose delete queue died with the process are removed.
func TestCompactionTieredSurvivesKill9(t *testing.T) {
	testStart := time.Now()
	mio := tiertest.StartMinIO(t)
	b := startTieredBroker(t, mio, "--log-cleaner-backoff", "50ms", "--log-cleaner-dedupe-buffer-size", "65536",
		"--log-cleaner-object-delete-grace", "1s", "--tier-orphan-grace", "2s", "--tier-sweep-interval", "1s")
	const topic = "tiercompact-kill9"
	createTopic(t, b.Admin(), topic, 1, map[string]string{
		"cleanup.policy": "compact", "internal.segment.bytes": "16384", "local.retention.bytes": "16384",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0",
	})
	m := newKeyedLog(killGen)
	p := startKillProducer(b, topic, m)
	defer p.close()

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 11))
	t.Logf("kill schedule seed %d", seed)
	midPass := 0
	known := map[string]bool{} // temporary files seen at earlier kills
	var lastStart time.Time
	for kill := range 20 {
		p.resume()
		time.Sleep(500*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond))))
		b.Kill()
		before := m.view() // every acknowledgement there will be came before the kill
		var fresh []string
		for _, f := range tempLeftovers(t, b.DataDir, time.Now()) {
			if name := strings.Fields(f)[0]; !known[name] {
				known[name] = true
				fresh = append(fresh, f)
			}
		}
		if len(fresh) > 0 {
			midPass++
			t.Logf("kill %d: interrupted a tiered pass (left %s)", kill+1, strings.Join(fresh, " "))
		}
		lastStart = time.Now()
		b.Start()
		p.quiesce(t)
		now := m.view()
		checkHWIsAcked(t, b, topic, now)
		checkNoLoss(t, b, topic, before, now, now.end())
	}
	st := fetchCompactionStatus(t, b, topic)
	t.Logf("20 kills (%d during a tiered pass, %d swaps in all), %d records produced, hot log from %d, %d objects; %v",
		midPass, logCount(b, "tiered compaction swapped objects", false), p.produced(), st.LocalStart, st.Objects, time.Since(testStart).Round(time.Millisecond))
	if st.LocalStart < m.view().end()/2 {
		t.Fatalf("hot log starts at %d of %d: the bucket does not hold most of the log", st.LocalStart, m.view().end())
	}

	// Quiet period: filler pushes the keyed records out of the hot log (its
	// copy keeps tombstones while the bucket holds older offsets) and the
	// tiered cleaner finishes.
	filler := fillerSeq
	rollLocalStartPast(t, b, p.asyncProducer, topic, m.view().end()-1, &filler)
	took := m.view().waitConverged(t, b, topic, convergence{}, 60*time.Second)
	if n := logCount(b, "msg=\"cleaned tiered objects\"", true); n == 0 {
		t.Fatalf("no tiered cleaning pass logged since the last restart")
	}
	final, wait := waitBucketMatchesManifest(t, mio, b, 30*time.Second)
	t.Logf("cleaned to the latest value per live key %v after the last kill's check; bucket matches the manifest %v later "+
		"(%d objects, %d bytes; %d orphans swept over the test); whole test %v", took.Round(time.Millisecond),
		wait.Round(time.Millisecond), final.objects, final.bytes, logCount(b, "orphan sweep: deleted", false),
		time.Since(testStart).Round(time.Millisecond))
	if left := tempLeftovers(t, b.DataDir, lastStart); len(left) > 0 {
		t.Errorf("temporary files of cleaning passes cut by kills are never removed: %s", strings.Join(left, " "))
	}
}
