package compaction

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/tier"
)

// segmentSource chains the batches of several sealed segments (skipping
// segments wholly below from), paced. It holds at most one segment file
// open; close releases it.
type segmentSource struct {
	log  Log
	segs []hotlog.SegmentInfo
	pace *pacer
	cur  *BatchReader
	done func()
}

var _ tier.BatchSource = (*segmentSource)(nil)

func segmentBatches(log Log, segs []hotlog.SegmentInfo, from int64, pace *pacer) *segmentSource {
	i := 0
	for i < len(segs) && segs[i].RangeEnd <= from {
		i++
	}
	return &segmentSource{log: log, segs: segs[i:], pace: pace}
}

// Next implements BatchSource.
func (s *segmentSource) Next() ([]byte, error) {
	for {
		if s.cur == nil {
			if len(s.segs) == 0 {
				return nil, io.EOF
			}
			f, size, err := s.log.OpenSealedSegment(s.segs[0].BaseOffset)
			if err != nil {
				return nil, err
			}
			s.segs = s.segs[1:]
			s.cur, s.done = NewBatchReader(io.NewSectionReader(f, 0, size), maxCleanerBatch), func() { f.Close() }
		}
		batch, err := s.cur.Next()
		if errors.Is(err, io.EOF) {
			s.close()
			continue
		}
		if err != nil {
			return nil, err
		}
		s.pace.wait(len(batch))
		return batch, nil
	}
}

func (s *segmentSource) close() {
	if s.done != nil {
		s.done()
	}
	s.cur, s.done = nil, nil
}

// pacer limits a pass's I/O to a byte rate (rate <= 0: no limit). Used by
// one pass, from one goroutine.
type pacer struct {
	ctx   context.Context
	rate  int64
	start time.Time
	bytes int64
}

func newPacer(ctx context.Context, rate int64) *pacer {
	return &pacer{ctx: ctx, rate: rate, start: time.Now()}
}

// wait accounts n bytes and sleeps until the average rate is within bounds
// (or ctx ends).
func (p *pacer) wait(n int) {
	if p.rate <= 0 {
		return
	}
	p.bytes += int64(n)
	due := p.start.Add(time.Duration(float64(p.bytes) / float64(p.rate) * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		select {
		case <-time.After(d):
		case <-p.ctx.Done():
		}
	}
}
