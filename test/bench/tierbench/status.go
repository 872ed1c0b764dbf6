package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// partStatus is the part of the broker's /v1/tier/status JSON used here
// (broker.PartitionTierStatus; decoded by name so that this tool does not
// import the broker).
type partStatus struct {
	Partition      int32 `json:"partition"`
	LocalStart     int64 `json:"localStart"`
	LocalEnd       int64 `json:"localEnd"`
	LocalBytes     int64 `json:"localBytes"`
	Tiered         bool  `json:"tiered"`
	TieredStart    int64 `json:"tieredStart"`
	TieredEnd      int64 `json:"tieredEnd"`
	Objects        int   `json:"objects"`
	TieredBytes    int64 `json:"tieredBytes"`
	UploadLagBytes int64 `json:"uploadLagBytes"`
}

const maxHTTPBody = 16 << 20

func httpGet(ctx context.Context, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPBody))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return body, err
}

func tierStatus(ctx context.Context, httpAddr, topic string) ([]partStatus, error) {
	u := url.URL{Scheme: "http", Host: httpAddr, Path: "/v1/tier/status", RawQuery: url.Values{"topic": {topic}}.Encode()}
	body, err := httpGet(ctx, u.String())
	if err != nil {
		return nil, err
	}
	var st []partStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("tier status: %w", err)
	}
	return st, nil
}

// getCounters sums strata_object_store_{requests,bytes}_total{op="GET"}
// over topics from the broker's /metrics.
func getCounters(ctx context.Context, httpAddr string) (requests, bytes int64, err error) {
	body, err := httpGet(ctx, "http://"+httpAddr+"/metrics")
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `op="GET"`) {
			continue
		}
		fields := strings.Fields(line)
		v, perr := strconv.ParseFloat(fields[len(fields)-1], 64)
		if perr != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "strata_object_store_requests_total{"):
			requests += int64(v)
		case strings.HasPrefix(line, "strata_object_store_bytes_total{"):
			bytes += int64(v)
		}
	}
	return requests, bytes, sc.Err()
}

// runWaitTiered waits until the topic's upload lag is zero, something is
// in the bucket, and local disk holds at most --max-local-fraction of the
// topic's bytes or has stopped shrinking (local retention has done all it
// will: what is left is the active segments and the retained tail).
func runWaitTiered(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("wait-tiered", flag.ContinueOnError)
	httpAddr := fs.String("http", "", "broker --http host:port")
	topic := fs.String("topic", "", "topic")
	frac := fs.Float64("max-local-fraction", 0.1, "local share of the topic's bytes that ends the wait")
	timeout := fs.Duration("timeout", 150*time.Second, "give up after")
	if err := fs.Parse(args); err != nil {
		return err
	}
	deadline := time.Now().Add(*timeout)
	start := time.Now()
	lastLocal, stable := int64(-1), 0
	for {
		local, tiered, lag, err := tierTotals(ctx, *httpAddr, *topic)
		if err != nil {
			return err
		}
		if local == lastLocal {
			stable++
		} else {
			lastLocal, stable = local, 0
		}
		share := float64(local) / float64(max(local+tiered, 1))
		if lag == 0 && tiered > 0 && (share <= *frac || stable >= 6) {
			say("tiered after %.1fs: local %d B, bucket %d B (local share %.3f)", time.Since(start).Seconds(), local, tiered, share)
			fmt.Printf("tiered seconds=%.1f local_bytes=%d tiered_bytes=%d local_share=%.3f\n",
				time.Since(start).Seconds(), local, tiered, share)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not tiered after %v: local %d B, bucket %d B, upload lag %d B", *timeout, local, tiered, lag)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func tierTotals(ctx context.Context, httpAddr, topic string) (local, tiered, lag int64, err error) {
	st, err := tierStatus(ctx, httpAddr, topic)
	for _, p := range st {
		local, tiered, lag = local+p.LocalBytes, tiered+p.TieredBytes, lag+p.UploadLagBytes
	}
	return local, tiered, lag, err
}
