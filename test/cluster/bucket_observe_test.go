package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/strata-log/strata/internal/testkit"
)

// Bounds of the bucket observers.
const (
	replayTimeout     = 2 * time.Minute // one `strata replay` of a topic
	restoreTimeout    = 3 * time.Minute // one `strata restore`
	statusTimeout     = 3 * time.Second // one GET /v1/tier/status or /metrics
	replayScanMaxLine = 1 << 20         // replay's JSON lines (small values here)
)

// replayedRecord is one line of `strata replay --format json`.
type replayedRecord struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Timestamp int64   `json:"timestamp"`
	Value     *string `json:"value"` // base64, or null
}

// replayBucket runs `strata replay` of topic from offset 0 to each
// partition's end in the bucket, with no broker involved. --allow-partial:
// a partition with nothing in the bucket yet is expected early on. It
// returns the records and replay's report (stderr).
func (c *Cluster) replayBucket(topic string) (map[int32]map[int64]string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), replayTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, "replay", "--object-store", c.ObjectStore, "--cluster", "cluster",
		"--topic", topic, "--from", "0", "--format", "json", "--allow-partial")
	cmd.Env = testkit.EnvWithout("STRATA_")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil && strings.Contains(stderr.String(), "no objects of topic") {
		return map[int32]map[int64]string{}, stderr.String(), nil // nothing uploaded yet
	}
	if err != nil {
		return nil, stderr.String(), fmt.Errorf("strata replay --topic %s: %w\n%s", topic, err, testkit.Tail(stderr.String(), 2000))
	}
	records, err := decodeReplay(&stdout)
	return records, stderr.String(), err
}

// decodeReplay indexes replay's JSON lines by partition and offset, with
// the values decoded.
func decodeReplay(r io.Reader) (map[int32]map[int64]string, error) {
	out := map[int32]map[int64]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), replayScanMaxLine)
	for sc.Scan() {
		var rec replayedRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("replay line %q: %w", testkit.Tail(sc.Text(), 200), err)
		}
		value := ""
		if rec.Value != nil {
			raw, err := base64.StdEncoding.DecodeString(*rec.Value)
			if err != nil {
				return nil, fmt.Errorf("replay p%d@%d: value not base64: %w", rec.Partition, rec.Offset, err)
			}
			value = string(raw)
		}
		if out[rec.Partition] == nil {
			out[rec.Partition] = map[int64]string{}
		}
		if _, dup := out[rec.Partition][rec.Offset]; dup {
			return nil, fmt.Errorf("replay printed p%d@%d twice", rec.Partition, rec.Offset)
		}
		out[rec.Partition][rec.Offset] = value
	}
	return out, sc.Err()
}

// runStrata runs the strata binary with args (bounded) and returns its
// combined output.
func (c *Cluster) runStrata(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = testkit.EnvWithout("STRATA_")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("strata %s: %w\n%s", args[0], err, out)
	}
	return string(out), nil
}

// bucketStatus is the part of broker.PartitionTierStatus (JSON of
// /v1/tier/status) about the bucket's recovery point.
type bucketStatus struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	Leader         bool   `json:"leader"` // only a leader knows the bucket lag
	BucketEnd      int64  `json:"bucketEnd"`
	BucketLagMs    int64  `json:"bucketLagMs"`
	BucketLagBytes int64  `json:"bucketLagBytes"`
	UploadMaxLagMs int64  `json:"uploadMaxLagMs"`
	Objects        int    `json:"objects"`
}

// bucketStatusOf returns broker b's status of every partition it hosts.
func bucketStatusOf(b *Broker) ([]bucketStatus, error) {
	body, err := httpGet(b, "/v1/tier/status")
	if err != nil {
		return nil, err
	}
	var list []bucketStatus
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("broker %d /v1/tier/status: %w", b.ID, err)
	}
	return list, nil
}

// leaderStatus returns, per partition of topic, the status its leader
// reports (partitions whose leader did not answer are absent).
func (c *Cluster) leaderStatus(topic string) map[int32]bucketStatus {
	out := map[int32]bucketStatus{}
	for _, b := range c.Brokers() {
		list, err := bucketStatusOf(b)
		if err != nil {
			continue
		}
		for _, s := range list {
			if s.Topic == topic && s.Leader {
				out[s.Partition] = s
			}
		}
	}
	return out
}

// httpGet GETs path from broker b's HTTP port, trying up to three times:
// a loaded machine can miss one statusTimeout.
func httpGet(b *Broker, path string) (body []byte, err error) {
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		if body, err = httpGetOnce(b, path); err == nil {
			return body, nil
		}
	}
	return nil, err
}

func httpGetOnce(b *Broker, path string) ([]byte, error) {
	client := &http.Client{Timeout: statusTimeout}
	resp, err := client.Get("http://" + b.HTTPAddr + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("broker %d %s: %s", b.ID, path, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 16<<20))
}

// metricWith adds the samples of a Prometheus metric on broker b's
// /metrics whose labels include every one of labels (name="value").
func metricWith(b *Broker, name string, labels map[string]string) (float64, error) {
	body, err := httpGet(b, "/metrics")
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		labelSet, value, ok := strings.Cut(rest, "} ")
		if !ok || !hasLabels(labelSet, labels) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); err == nil {
			sum += v
		}
	}
	return sum, nil
}

func hasLabels(labelSet string, want map[string]string) bool {
	have := strings.Split(labelSet, ",")
	for k, v := range want {
		found := false
		for _, h := range have {
			found = found || h == fmt.Sprintf("%s=%q", k, v)
		}
		if !found {
			return false
		}
	}
	return true
}

// metricOverBrokers sums metricWith over every running broker; a broker
// that does not answer is an error (a counter sum missing one broker would
// read as a drop).
func (c *Cluster) metricOverBrokers(name string, labels map[string]string) (float64, error) {
	var sum float64
	for _, b := range c.Brokers() {
		if !b.Running() {
			continue
		}
		v, err := metricWith(b, name, labels)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// percentiles returns the nearest-rank p50, p99 and the maximum of ds
// (zeros when empty).
func percentiles(ds []time.Duration) (p50, p99, maxOf time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	sorted := append([]time.Duration(nil), ds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	rank := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(sorted))-1e-9)) - 1 // the epsilon absorbs 0.99*200 = 198.00000000000003
		return sorted[min(max(i, 0), len(sorted)-1)]
	}
	return rank(0.50), rank(0.99), sorted[len(sorted)-1]
}

// durationFromEnv reads a positive duration from env var name, else def.
func durationFromEnv(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	raw := getenv(name)
	if raw == "" {
		return def, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 90s or 5m", name, raw)
	}
	return d, nil
}
