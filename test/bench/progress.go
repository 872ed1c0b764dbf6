package bench

import "sync/atomic"

// Progress counts a running workload's completed records and bytes, for a
// caller that shows progress while it runs; Total is the records the
// workload will do (0 until known). A nil *Progress counts nothing.
type Progress struct {
	Records, Bytes, Total atomic.Int64
}

func (p *Progress) add(records, bytes int64) {
	if p != nil {
		p.Records.Add(records)
		p.Bytes.Add(bytes)
	}
}

// Read returns the counts so far.
func (p *Progress) Read() (records, total, bytes int64) {
	return p.Records.Load(), p.Total.Load(), p.Bytes.Load()
}
