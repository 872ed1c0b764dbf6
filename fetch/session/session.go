package session

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// Epochs with a meaning of their own (FetchMetadata in Kafka).
const (
	FinalEpoch   int32 = -1 // a sessionless full fetch
	InitialEpoch int32 = 0  // a full fetch that opens a session
)

// Errors of Begin, mapped by the broker to Kafka's codes.
var (
	ErrSessionNotFound = errors.New("fetch session: id not found")  // FETCH_SESSION_ID_NOT_FOUND
	ErrInvalidEpoch    = errors.New("fetch session: invalid epoch") // INVALID_FETCH_SESSION_EPOCH
)

// Key names a partition: by topic name (Fetch below v13) or id (v13+).
type Key struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
}

// Params are a partition's fetch parameters as the request gives them;
// the session keeps the last ones a request gave.
type Params struct {
	FetchOffset        int64
	LogStartOffset     int64 // followers only
	MaxBytes           int32
	CurrentLeaderEpoch int32
	LastFetchedEpoch   int32
}

// Partition is one partition to fetch: its key and parameters.
type Partition struct {
	Key
	Params
}

// Request is the session part of a Fetch request.
type Request struct {
	ID         int32
	Epoch      int32
	Partitions []Partition // named by the request, in request order
	Forgotten  []Key       // incremental fetches: partitions to drop
	// Privileged is a follower's fetch: its sessions outrank consumers'.
	Privileged bool
}

// Result is what the answer holds for one partition, reported to Finish.
type Result struct {
	HighWatermark, LastStableOffset, LogStartOffset int64
	HasRecords                                      bool
	ErrorCode                                       int16
}

// Config bounds the cache.
type Config struct {
	// Slots is max.incremental.fetch.session.cache.slots; 0: 1000.
	// Negative: no sessions at all (every fetch is served sessionless).
	Slots int
	// EvictAfter is how long a session must be idle to be stale, and how
	// long it must exist before a higher-ranked session may evict it; 0:
	// 120 s, as Kafka.
	EvictAfter time.Duration
	// MaxPartitions bounds the partitions cached across all sessions (each
	// costs about a hundred bytes); 0: 200,000.
	MaxPartitions int
}

const (
	defaultSlots         = 1000
	defaultEvictAfter    = 120 * time.Second
	defaultMaxPartitions = 200_000
)

// Cache holds the sessions. Safe for concurrent use.
type Cache struct {
	slots         int
	evictAfter    time.Duration
	maxPartitions int
	now           func() time.Time

	mu         sync.Mutex
	sessions   map[int32]*session
	partitions int // cached across sessions, at most maxPartitions
}

// NewCache returns an empty cache.
func NewCache(cfg Config) *Cache {
	c := &Cache{slots: cfg.Slots, evictAfter: cfg.EvictAfter, maxPartitions: cfg.MaxPartitions, now: time.Now,
		sessions: map[int32]*session{}}
	if c.slots == 0 {
		c.slots = defaultSlots
	}
	if c.maxPartitions <= 0 {
		c.maxPartitions = defaultMaxPartitions
	}
	if c.evictAfter <= 0 {
		c.evictAfter = defaultEvictAfter
	}
	return c
}

// Len is the number of sessions cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

// session is one cached session. REQUIRES: Cache.mu held for every access.
type session struct {
	id         int32
	nextEpoch  int32 // the epoch the next incremental fetch must carry
	privileged bool
	created    time.Time
	lastUsed   time.Time
	parts      []cachedPartition // in the order partitions joined
	index      map[Key]int       // into parts
}

// cachedPartition is a partition of a session with the values last sent.
type cachedPartition struct {
	Partition
	sent                     bool // the values below were sent once
	hw, lastStable, logStart int64
}

// Context is one request's view of its session: the partitions to fetch
// and, through Finish, what the answer carries.
type Context struct {
	c          *Cache
	kind       kind
	closeID    int32 // full fetch: the session the request closed (0: none)
	session    *session
	partitions []Partition
	privileged bool
}

type kind int8

const (
	sessionless kind = iota
	full
	incremental
)

// Begin starts a request: it closes, checks or advances the session the
// request names and returns the partitions to fetch, or ErrSessionNotFound
// / ErrInvalidEpoch.
func (c *Cache) Begin(req Request) (*Context, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.Epoch == FinalEpoch || req.Epoch == InitialEpoch {
		c.remove(req.ID) // a full fetch closes the session it names
		k := full
		if req.Epoch == FinalEpoch || c.slots < 0 {
			k = sessionless
		}
		return &Context{c: c, kind: k, partitions: req.Partitions, privileged: req.Privileged}, nil
	}
	s, ok := c.sessions[req.ID]
	if !ok {
		return nil, ErrSessionNotFound
	}
	if req.Epoch != s.nextEpoch {
		return nil, ErrInvalidEpoch
	}
	if c.partitions+s.growth(req.Partitions) > c.maxPartitions {
		// Too big to keep: the client falls back to full fetches, which are
		// served without a session when they do not fit either.
		c.remove(req.ID)
		return nil, ErrSessionNotFound
	}
	s.nextEpoch = nextEpoch(s.nextEpoch)
	s.lastUsed = c.now()
	before := len(s.parts)
	s.update(req.Partitions, req.Forgotten)
	c.partitions += len(s.parts) - before
	parts := make([]Partition, len(s.parts))
	for i, p := range s.parts {
		parts[i] = p.Partition
	}
	return &Context{c: c, kind: incremental, session: s, partitions: parts, privileged: req.Privileged}, nil
}

// remove closes session id, if cached. REQUIRES: c.mu held.
func (c *Cache) remove(id int32) {
	if s, ok := c.sessions[id]; ok {
		c.partitions -= len(s.parts)
		delete(c.sessions, id)
	}
}

// growth is how many of named the session does not hold yet.
func (s *session) growth(named []Partition) int {
	n := 0
	for _, p := range named {
		if _, ok := s.index[p.Key]; !ok {
			n++
		}
	}
	return n
}

// nextEpoch wraps from MaxInt32 to 1, as Kafka's FetchMetadata.nextEpoch.
func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// update adds or replaces the named partitions and drops the forgotten.
// The partitions of one topic stay adjacent (Partitions' order), so the
// broker lays an incremental fetch out as request topics in one pass.
func (s *session) update(named []Partition, forgotten []Key) {
	added := false
	for _, p := range named {
		if i, ok := s.index[p.Key]; ok {
			s.parts[i].Params = p.Params
			continue
		}
		s.index[p.Key] = len(s.parts)
		s.parts = append(s.parts, cachedPartition{Partition: p})
		added = true
	}
	gone := make(map[Key]bool, len(forgotten))
	for _, k := range forgotten {
		gone[k] = true
	}
	if added || len(gone) > 0 {
		s.regroup(gone)
	}
}

// regroup drops the gone partitions and orders the rest by topic, topics in
// order of first appearance, keeping the order within a topic; then it
// rebuilds the index.
func (s *session) regroup(gone map[Key]bool) {
	type topicKey struct {
		name string
		id   [16]byte
	}
	var order []topicKey
	byTopic := map[topicKey][]cachedPartition{}
	for _, p := range s.parts {
		if gone[p.Key] {
			continue
		}
		k := topicKey{p.Topic, p.TopicID}
		if _, seen := byTopic[k]; !seen {
			order = append(order, k)
		}
		byTopic[k] = append(byTopic[k], p)
	}
	s.parts = s.parts[:0]
	clear(s.index)
	for _, k := range order {
		for _, p := range byTopic[k] {
			s.index[p.Key] = len(s.parts)
			s.parts = append(s.parts, p)
		}
	}
}

// Partitions are the partitions to fetch, in the order the answer lists
// them: the request's for a full fetch, the whole session's for an
// incremental one (each topic's partitions adjacent).
func (x *Context) Partitions() []Partition { return x.partitions }

// Sessionless reports whether the request opens, keeps and closes nothing
// more (epoch -1, or sessions off): its answer carries every partition and
// names session 0, so Finish need not be told what it holds.
func (x *Context) Sessionless() bool { return x.kind == sessionless }

// Finish records what the answer holds for each partition of Partitions
// (results in the same order) and returns the session id the answer names
// and, per partition, whether the answer carries it. A full fetch opens its
// session here, if the cache admits it.
func (x *Context) Finish(results []Result) (sessionID int32, include []bool) {
	include = make([]bool, len(results))
	switch x.kind {
	case sessionless:
		for i := range include {
			include[i] = true
		}
		return 0, include
	case full:
		for i := range include {
			include[i] = true
		}
		return x.c.open(x.partitions, results, x.privileged), include
	}
	c := x.c
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := x.session.parts
	for i, r := range results {
		key := x.partitions[i].Key
		j := i
		if j >= len(parts) || parts[j].Key != key { // a racing request changed the session
			var ok bool
			if j, ok = x.session.index[key]; !ok {
				include[i] = true // forgotten meanwhile: answer it anyway
				continue
			}
		}
		include[i] = parts[j].record(r)
	}
	return x.session.id, include
}

// record stores the values an answer sends for p and reports whether the
// answer must carry p.
func (p *cachedPartition) record(r Result) bool {
	changed := !p.sent || r.HasRecords || r.ErrorCode != 0 ||
		r.HighWatermark != p.hw || r.LastStableOffset != p.lastStable || r.LogStartOffset != p.logStart
	p.sent, p.hw, p.lastStable, p.logStart = true, r.HighWatermark, r.LastStableOffset, r.LogStartOffset
	if r.ErrorCode != 0 {
		p.hw = -1 // as Kafka: the partition is sent again once its error clears
	}
	return changed
}

// open caches a new session for a full fetch, evicting one if the rules
// allow; 0 when the cache cannot admit it.
func (c *Cache) open(parts []Partition, results []Result, privileged bool) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(parts) > c.maxPartitions {
		return 0
	}
	for len(c.sessions) >= c.slots || c.partitions+len(parts) > c.maxPartitions {
		if !c.evictFor(privileged, len(parts), now) {
			return 0
		}
	}
	s := &session{id: c.newID(), nextEpoch: 1, privileged: privileged, created: now, lastUsed: now,
		parts: make([]cachedPartition, len(parts)), index: make(map[Key]int, len(parts))}
	for i, p := range parts {
		s.parts[i] = cachedPartition{Partition: p}
		s.parts[i].record(results[i])
	}
	s.regroup(nil)
	c.sessions[s.id] = s
	c.partitions += len(s.parts)
	return s.id
}

// newID picks an unused positive id. REQUIRES: c.mu held; the cache holds
// at most slots sessions, far fewer than the ids.
func (c *Cache) newID() int32 {
	for {
		id := rand.Int32N(1<<31-1) + 1
		if _, used := c.sessions[id]; !used {
			return id
		}
	}
}

// evictFor frees a slot for a new session of the given rank, reporting
// whether it did (see the package comment). REQUIRES: c.mu held.
func (c *Cache) evictFor(privileged bool, size int, now time.Time) bool {
	newcomer := rank{privileged: privileged, size: size}
	var stale, lowest *session
	for _, s := range c.sessions {
		if now.Sub(s.lastUsed) >= c.evictAfter && (stale == nil || s.lastUsed.Before(stale.lastUsed)) {
			stale = s
		}
		if now.Sub(s.created) < c.evictAfter || (s.privileged && !privileged) {
			continue // too young, or a follower's session and a consumer asking
		}
		if lowest == nil || s.rank().below(lowest.rank()) {
			lowest = s
		}
	}
	victim := stale
	if victim == nil && lowest != nil && lowest.rank().below(newcomer) {
		victim = lowest
	}
	if victim == nil {
		return false
	}
	c.remove(victim.id)
	return true
}

// rank orders sessions for eviction: followers' above consumers', then by
// partition count.
type rank struct {
	privileged bool
	size       int
}

func (s *session) rank() rank { return rank{privileged: s.privileged, size: len(s.parts)} }

func (a rank) below(b rank) bool {
	if a.privileged != b.privileged {
		return !a.privileged
	}
	return a.size < b.size
}
