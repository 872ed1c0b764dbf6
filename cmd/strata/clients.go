package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxLineBytes bounds one stdin line of `strata produce` (Kafka's default
// max.message.bytes is about 1 MiB; the broker has the final word).
const maxLineBytes = 16 << 20

// runProduce writes each stdin line as one record (acks=all) and waits for
// every acknowledgement.
func runProduce(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("produce", c)
	conn := newConnFlags(fs, c)
	topic := fs.String("topic", "", "topic to write to (required)")
	keySep := fs.String("key-separator", "", "split each line at the first occurrence into key and value (empty: no key)")
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return firstErr(err, usageErrorf("unexpected arguments %q", rest))
	}
	if *topic == "" {
		return usageErrorf("--topic is required")
	}
	// Auto-creation is the broker's call (auto.create.topics.enable), as with
	// kcat; kgo only asks for it when allowed to.
	cl, conf, err := conn.client(kgo.DefaultProduceTopic(*topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := checkTopic(ctx, cl, conf.seeds, *topic, true); err != nil {
		return err
	}
	var (
		mu       sync.Mutex // guards firstErr and acked, written by promises
		firstErr error
		acked    int
	)
	promise := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		} else if err == nil {
			acked++
		}
	}
	scanner := bufio.NewScanner(c.stdin)
	scanner.Buffer(make([]byte, 64<<10), maxLineBytes)
	for scanner.Scan() && ctx.Err() == nil {
		cl.Produce(ctx, lineRecord(scanner.Text(), *keySep), promise)
	}
	flushErr := cl.Flush(ctx)
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(c.stderr, "produced %d records to %s\n", acked, *topic)
	return errors.Join(scanner.Err(), firstErr, flushErr)
}

func lineRecord(line, keySep string) *kgo.Record {
	if keySep != "" {
		if key, value, ok := strings.Cut(line, keySep); ok {
			return &kgo.Record{Key: []byte(key), Value: []byte(value)}
		}
	}
	return &kgo.Record{Value: []byte(line)}
}

// runConsume prints record values, one per line, from every partition of a
// topic, without a consumer group: it starts at the end (or the log start with
// --from-beginning) and commits nothing.
func runConsume(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("consume", c)
	conn := newConnFlags(fs, c)
	topic := fs.String("topic", "", "topic to read (required)")
	fromBeginning := fs.Bool("from-beginning", false, "start at the log start offset instead of the end")
	count := fs.Int("count", 0, "exit after this many records (0: run until interrupted)")
	printKeys := fs.Bool("print-key", false, "print key<TAB>value")
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return firstErr(err, usageErrorf("unexpected arguments %q", rest))
	}
	if *topic == "" || *count < 0 {
		return usageErrorf("--topic is required and --count must be ≥ 0")
	}
	start := kgo.NewOffset().AtEnd()
	if *fromBeginning {
		start = kgo.NewOffset().AtStart()
	}
	cl, conf, err := conn.client(kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(start))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := checkTopic(ctx, cl, conf.seeds, *topic, false); err != nil {
		return err
	}
	out := bufio.NewWriter(c.stdout)
	defer out.Flush()
	for seen := 0; *count == 0 || seen < *count; {
		fetches := cl.PollRecords(ctx, *count-seen)
		if ctx.Err() != nil {
			return nil // interrupted: a normal way to stop
		}
		if err := fatalFetchError(fetches); err != nil {
			return err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if *printKeys {
				fmt.Fprintf(out, "%s\t", r.Key)
			}
			fmt.Fprintf(out, "%s\n", r.Value)
			seen++
		})
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// fatalFetchError returns an error that retrying cannot fix; kgo retries
// the others (leader moves, transient network errors) itself.
func fatalFetchError(fetches kgo.Fetches) error {
	var fatal error
	fetches.EachError(func(t string, p int32, err error) {
		if errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.Canceled) {
			return
		}
		if fatal == nil {
			fatal = fmt.Errorf("topic %s partition %d: %w", t, p, err)
		}
	})
	return fatal
}

// topicCheckTimeout bounds the first exchange of produce and consume with
// the cluster: a command against no broker, or a topic that is not there,
// fails within it with a clear message instead of waiting forever.
const topicCheckTimeout = 10 * time.Second

// checkTopic asks the cluster for topic's metadata (asking it to create
// the topic when create is true; the broker decides, as with kcat) and
// fails when no broker answers within topicCheckTimeout or the topic does
// not exist.
func checkTopic(ctx context.Context, cl *kgo.Client, seeds []string, topic string, create bool) error {
	ctx, cancel := context.WithTimeout(ctx, topicCheckTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics, req.AllowAutoTopicCreation = append(req.Topics, rt), create
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("no broker answered at %s within %v (is strata serve running there? see --brokers): %w",
				strings.Join(seeds, ","), topicCheckTimeout, err)
		}
		return fmt.Errorf("no broker answered at %s (is strata serve running there? see --brokers): %w", strings.Join(seeds, ","), err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("metadata of %s: %d topics in the answer", topic, len(resp.Topics))
	}
	switch err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); {
	case err == nil, errors.Is(err, kerr.LeaderNotAvailable): // just created: its leader is being elected
		return nil
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("topic %s does not exist (create it with strata topic create; this cluster does not create topics on use)", topic)
	default:
		return fmt.Errorf("topic %s: %w", topic, err)
	}
}
