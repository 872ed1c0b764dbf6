package quota

import "github.com/twmb/franz-go/pkg/kmsg"

// ProduceBytes is the record-batch bytes of a Produce request, what
// producer_byte_rate counts.
func ProduceBytes(r *kmsg.ProduceRequest) int64 {
	var n int64
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			n += int64(len(p.Records))
		}
	}
	return n
}

// FetchBytes is the record bytes of a Fetch response, what
// consumer_byte_rate counts.
func FetchBytes(r *kmsg.FetchResponse) int64 {
	var n int64
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			n += int64(len(p.RecordBatches))
		}
	}
	return n
}
