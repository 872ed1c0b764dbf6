package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestProduceFlags(t *testing.T) {
	c := &cli{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }}
	o, _, err := parseProduceFlags(c, []string{"--topic", "t", "--partition", "2", "--header", "a=1", "--header", "b=x=y",
		"--header", "empty=", "--compression", "zstd", "--acks", "1", "--key-separator", ":"})
	if err != nil {
		t.Fatal(err)
	}
	r := o.record("k:v")
	if string(r.Key) != "k" || string(r.Value) != "v" || r.Partition != 2 || len(r.Headers) != 3 ||
		r.Headers[1].Key != "b" || string(r.Headers[1].Value) != "x=y" || string(r.Headers[2].Value) != "" {
		t.Errorf("record %+v", r)
	}
	if o.acks != kgo.LeaderAck() || *o.codec != kgo.ZstdCompression() {
		t.Errorf("acks %v, codec %v", o.acks, o.codec)
	}
	o, _, err = parseProduceFlags(c, []string{"--topic", "t"})
	if err != nil || o.acks != kgo.AllISRAcks() || o.partition != -1 || o.headers != nil {
		t.Errorf("defaults: %+v, %v", o, err)
	}
}

func TestProduceUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--topic", "t", "--partition", "-2"},
		{"--topic", "t", "--partition", "4294967296"},
		{"--topic", "t", "--header", "novalue"},
		{"--topic", "t", "--header", "=v"},
		{"--topic", "t", "--compression", "brotli"},
		{"--topic", "t", "--acks", "2"},
		{"--topic", "t", "extra"},
	} {
		var out bytes.Buffer
		c := &cli{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		if err := runProduce(context.Background(), c, args); !errors.Is(err, errUsage) {
			t.Errorf("produce %v: %v, want a usage error", args, err)
		}
	}
}
