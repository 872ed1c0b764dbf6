package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// leaderPollInterval is how often the leader watch asks for metadata.
const leaderPollInterval = 250 * time.Millisecond

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// leaderWatch counts leader elections of a set of partitions by polling
// metadata: every rise of a partition's leader epoch is one election (the
// controller raises the epoch by one per election), so elections between
// two polls are counted too. A broker's view may be stale, so only the
// highest epoch seen counts. It also counts the polls that saw a new
// leader id.
type leaderWatch struct {
	c       *Cluster
	watched map[string][]int32 // topic -> partitions
	stop    context.CancelFunc
	done    chan struct{}

	mu struct {
		sync.Mutex
		epoch, leader map[topicPartition]int32
		elections     map[string]int // by topic
		leaderChanges int
		polls, failed int
	}
}

func startLeaderWatch(c *Cluster, watched map[string][]int32) *leaderWatch {
	ctx, cancel := context.WithCancel(context.Background())
	lw := &leaderWatch{c: c, watched: watched, stop: cancel, done: make(chan struct{})}
	lw.mu.epoch, lw.mu.leader, lw.mu.elections = map[topicPartition]int32{}, map[topicPartition]int32{}, map[string]int{}
	go lw.run(ctx)
	c.t.Cleanup(lw.finish)
	return lw
}

func (lw *leaderWatch) run(ctx context.Context) {
	defer close(lw.done)
	tick := time.NewTicker(leaderPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		lw.poll(ctx)
	}
}

// poll asks one up broker (a different one each time) for the watched
// topics' metadata.
func (lw *leaderWatch) poll(ctx context.Context) {
	up := lw.c.Up()
	lw.mu.Lock()
	lw.mu.polls++
	n := lw.mu.polls
	lw.mu.Unlock()
	if len(up) == 0 {
		return
	}
	topics := sortedKeys(lw.watched)
	resp, err := lw.c.Metadata(ctx, up[n%len(up)], topics...)
	if err != nil {
		lw.mu.Lock()
		lw.mu.failed++
		lw.mu.Unlock()
		return
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || kerr.ErrorForCode(t.ErrorCode) != nil {
			continue
		}
		for _, p := range t.Partitions {
			if slices.Contains(lw.watched[*t.Topic], p.Partition) && p.Leader >= 0 {
				lw.note(topicPartition{*t.Topic, p.Partition}, p.Leader, p.LeaderEpoch)
			}
		}
	}
}

func (lw *leaderWatch) note(tp topicPartition, leader, epoch int32) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	known, seen := lw.mu.epoch[tp]
	if seen && epoch <= known {
		return
	}
	if seen {
		lw.mu.elections[tp.topic] += int(epoch - known)
		if lw.mu.leader[tp] != leader {
			lw.mu.leaderChanges++
		}
	}
	lw.mu.epoch[tp], lw.mu.leader[tp] = epoch, leader
}

// finish stops the polling (idempotent).
func (lw *leaderWatch) finish() {
	lw.stop()
	<-lw.done
}

// elections is the number of elections seen, in all.
func (lw *leaderWatch) elections() int {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	n := 0
	for _, e := range lw.mu.elections {
		n += e
	}
	return n
}

func (lw *leaderWatch) String() string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	var parts []string
	for _, topic := range sortedKeys(lw.mu.elections) {
		parts = append(parts, fmt.Sprintf("%s=%d", topic, lw.mu.elections[topic]))
	}
	return fmt.Sprintf("elections by topic [%s]; %d polls saw a new leader; %d of %d metadata polls failed",
		strings.Join(parts, " "), lw.mu.leaderChanges, lw.mu.failed, lw.mu.polls)
}
