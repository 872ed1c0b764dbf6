package hotlog

import (
	"context"
	"testing"
)

// BenchmarkAppend measures one 1 KiB-record batch per append; with fsync
// durability each append also waits for its group commit, as acks=all would.
func BenchmarkAppend(b *testing.B) {
	for _, mode := range []struct {
		name       string
		durability Durability
	}{{"fsync", DurabilityFsync}, {"replication", DurabilityReplication}} {
		b.Run(mode.name, func(b *testing.B) {
			cfg := testConfig(b, b.TempDir())
			cfg.SegmentBytes, cfg.IndexIntervalBytes, cfg.Durability = 64<<20, 4096, mode.durability
			l := mustOpen(b, cfg)
			defer l.Close()
			batch := simpleBatch(b, 1, 1, 1024)
			buf := make([]byte, len(batch))
			b.SetBytes(int64(len(batch)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				copy(buf, batch)
				res, err := l.Append(buf, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.WaitFlushed(context.Background(), res.LastOffset); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
