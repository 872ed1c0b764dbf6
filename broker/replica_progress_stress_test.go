package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/replication"
)

// TestLogProgressNeverMissedUnderLoad: with fsync durability, many
// partitions, acks=all producers, a consumer group committing offsets and
// transactional producers all at once, every append and flush of a leader
// reaches its replica through the log watcher: the tick's safety net
// (ReplicaStats.MissedProgress) never has to report one. Each miss would
// be an acks=all producer or a long poll waiting up to two ticks for no
// reason.
func TestLogProgressNeverMissedUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		fastTxns(c)
		c.Durability = hotlog.DurabilityFsync
	})
	adm, _ := adminClient(t, tb.b)
	const partitions = 24
	createDataTopic(t, adm, "load", partitions, nil)
	createDataTopic(t, adm, "tin", 4, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	addr := tb.b.Addr().String()

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	for i := range 3 {
		run(fmt.Sprintf("producer %d", i), func(ctx context.Context) error { return produceAcksAll(ctx, addr, "load") })
	}
	run("group consumer", func(ctx context.Context) error { return consumeCommitting(ctx, addr, "load", "stress-group") })
	for i := range 2 {
		id := fmt.Sprintf("stress-txn-%d", i)
		run(id, func(ctx context.Context) error { return produceTransactions(ctx, addr, id, "tin") })
	}
	slow := waitLookup(t, tb.b, "load", 0)
	run("slow partition", func(ctx context.Context) error { return holdReplicaLockAtTimes(ctx, tb.b, slow) })
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if missed := tb.b.ReplicaStats().MissedProgress; missed != 0 {
		t.Fatalf("the tick reported log progress the watcher missed %d times", missed)
	}
}

// holdReplicaLockAtTimes takes p's replica lock for 150
// ms every 300 ms, as an append does whose roll or cleaner swap waits for a
// slow fsync: the tick loop waits behind it, then checks the partitions
// after it twice in quick succession. The watcher of every other partition
// must still report their progress itself.
func holdReplicaLockAtTimes(ctx context.Context, b *Broker, p *partition) error {
	for ctx.Err() == nil {
		err := p.replica.WithReplica(func(*replication.Replica) error {
			time.Sleep(150 * time.Millisecond)
			return nil
		})
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(150 * time.Millisecond):
		}
	}
	return ctx.Err()
}

// produceAcksAll produces small records with acks=all (kgo's default,
// idempotent) until ctx ends.
func produceAcksAll(ctx context.Context, addr, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := 0; ctx.Err() == nil; i++ {
		for j := range 50 {
			cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "%d", j), Value: fmt.Appendf(nil, "%d-%d", i, j)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// consumeCommitting reads topic in a group, committing after every poll.
func consumeCommitting(ctx context.Context, addr, topic, group string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// produceTransactions commits small transactions until ctx ends.
func produceTransactions(ctx context.Context, addr, txnID, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := 0; ctx.Err() == nil; i++ {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for j := range 10 {
			cl.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d-%d", txnID, i, j)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			return err
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("transaction %d at %s: %w", i, time.Now().Format("15:04:05.000"), err)
		}
	}
	return ctx.Err()
}
