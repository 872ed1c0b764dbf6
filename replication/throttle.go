package replication

// MoveThrottle bounds the bytes a leader serves to replicas being added
// by a reassignment, so that a move never starves live followers
// (Kafka's leader.replication.throttled.rate). It is a token bucket of one
// second's worth of bytes: a fetch may take the partitions of a move while
// tokens remain, and what it served is charged after (the balance may go
// below zero when a batch is larger than the tokens left; the next
// fetches wait until it refills), as Kafka's replication quota checks
// before and records after. Pure: the caller
// passes the time in milliseconds and serializes calls.
type MoveThrottle struct {
	rate   int64   // bytes per second; 0: unlimited
	tokens float64 // may be negative after a charge
	lastMs int64
}

// SetRate changes the limit (0: unlimited); the bucket starts full.
func (t *MoveThrottle) SetRate(bytesPerSecond int64, nowMs int64) {
	if bytesPerSecond < 0 {
		bytesPerSecond = 0
	}
	if t.rate != bytesPerSecond {
		t.rate, t.tokens, t.lastMs = bytesPerSecond, float64(bytesPerSecond), nowMs
	}
}

// Rate is the limit in bytes per second (0: unlimited).
func (t *MoveThrottle) Rate() int64 { return t.rate }

// Allow reports whether a move's partition may be served now, and how
// many bytes (the tokens left; 0 when unlimited): the caller caps the read
// there, so one fetch does not run far into debt.
func (t *MoveThrottle) Allow(nowMs int64) (ok bool, limit int) {
	if t.rate == 0 {
		return true, 0
	}
	t.refill(nowMs)
	if t.tokens <= 0 {
		return false, 0
	}
	return true, max(int(t.tokens), 1)
}

// Charge records n bytes served to a replica being added.
func (t *MoveThrottle) Charge(n int, nowMs int64) {
	if t.rate == 0 {
		return
	}
	t.refill(nowMs)
	t.tokens -= float64(n)
}

func (t *MoveThrottle) refill(nowMs int64) {
	if nowMs > t.lastMs {
		t.tokens = min(float64(t.rate), t.tokens+float64(t.rate)*float64(nowMs-t.lastMs)/1000)
		t.lastMs = nowMs
	}
}
