package quota

import "github.com/twmb/franz-go/pkg/kmsg"

// WaitsInHandler reports the APIs whose handlers park (long polls,
// acks=all, rebalances): their wall time is not request-handler time, so
// request_percentage does not count it.
func WaitsInHandler(apiKey int16) bool {
	switch apiKey {
	case 0, 1, 11, 14: // Produce, Fetch, JoinGroup, SyncGroup
		return true
	}
	return false
}

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
