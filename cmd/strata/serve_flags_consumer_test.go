package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/strata-log/strata/broker/group/consumer"
)

func assignorNames(as []consumer.Assignor) string {
	var names []string
	for _, a := range as {
		names = append(names, a.Name())
	}
	return strings.Join(names, ",")
}

func TestServeConsumerGroupDefaults(t *testing.T) {
	cfg, err := parseServeForTest(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.broker.Group.Consumer
	if got := assignorNames(c.Assignors); got != "uniform,range" {
		t.Errorf("assignors %q, want uniform,range (Kafka's default order)", got)
	}
	if c.SessionTimeoutMs != 45000 || c.HeartbeatIntervalMs != 5000 || c.MaxSize != 0 {
		t.Errorf("consumer config = %+v, want session 45000 heartbeat 5000 max size 0", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("default config invalid: %v", err)
	}
}

func TestServeConsumerGroupFlags(t *testing.T) {
	cfg, err := parseServeForTest(t, []string{
		"--group-consumer-assignors", " range , uniform",
		"--group-consumer-session-timeout", "10s", "--group-consumer-heartbeat-interval", "500ms",
		"--group-consumer-max-size", "7",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.broker.Group.Consumer
	if got := assignorNames(c.Assignors); got != "range,uniform" {
		t.Errorf("assignors %q, want range,uniform (the first is the default)", got)
	}
	if c.SessionTimeoutMs != 10000 || c.HeartbeatIntervalMs != 500 || c.MaxSize != 7 {
		t.Errorf("consumer config = %+v", c)
	}

	cfg, err = parseServeForTest(t, nil, map[string]string{
		"STRATA_GROUP_CONSUMER_ASSIGNORS": "range", "STRATA_GROUP_CONSUMER_MAX_SIZE": "3",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.broker.Group.Consumer; assignorNames(c.Assignors) != "range" || c.MaxSize != 3 {
		t.Errorf("environment not applied: %+v", c)
	}
}

func TestServeRejectsBadConsumerGroupFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--group-consumer-assignors", "uniform,sticky"}, `unknown assignor "sticky"`},
		{[]string{"--group-consumer-assignors", "cooperative-sticky"}, "unknown assignor"},
		{[]string{"--group-consumer-assignors", " , "}, "--group-consumer-assignors is empty"},
		{[]string{"--group-consumer-assignors", "range,range"}, "distinct"},
		{[]string{"--group-consumer-heartbeat-interval", "45s"}, "below the session timeout"},
		{[]string{"--group-consumer-session-timeout", "3s", "--group-consumer-heartbeat-interval", "5s"}, "below the session timeout"},
		{[]string{"--group-consumer-heartbeat-interval", "0s"}, "--group-consumer-heartbeat-interval"},
		{[]string{"--group-consumer-session-timeout", "0s"}, "--group-consumer-session-timeout"},
		{[]string{"--group-consumer-session-timeout", "600h"}, "want 1ms..24d"},
		{[]string{"--group-consumer-max-size", "-1"}, "--group-consumer-max-size -1: want ≥ 0"},
		{[]string{"--group-consumer-max-size", "many"}, "invalid value"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseServeForTest(t, tc.args, nil)
			if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want a usage error containing %q, got %v", tc.want, err)
			}
		})
	}
}
