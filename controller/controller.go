package controller

// CONTRACT STUB (lead): the controller helper replaces this file.

import (
	"context"
	"log/slog"
	"time"

	"github.com/strata-log/strata/metadata"
)

// Config configures a controller candidate.
type Config struct {
	// NodeID is this broker's id (the election value).
	NodeID int32
	// Store is the metadata store (its etcd client runs the election).
	Store *metadata.Store
	// SessionTTL is the election session's lease TTL. Default 10s.
	SessionTTL time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Controller is one broker's controller candidate: it campaigns in the
// background and, while elected, keeps every partition led (Plan).
type Controller struct{ cfg Config }

// Start begins campaigning; the controller runs until Close or ctx ends.
func Start(ctx context.Context, cfg Config) (*Controller, error) { return &Controller{cfg: cfg}, nil }

// ID is the node id of the elected controller as last observed; -1 unknown.
func (c *Controller) ID() int32 { return c.cfg.NodeID }

// Active reports whether this candidate is the elected controller.
func (c *Controller) Active() bool { return true }

// Close resigns (if elected) and stops.
func (c *Controller) Close() error { return nil }

// Assign places count partitions starting at partition index from on rf
// of brokers each, spreading leaders and replicas evenly, and racks where
// brokers have them (Kafka's rack-aware placement).
func Assign(brokers []metadata.BrokerInfo, from, count, rf int) [][]int32 {
	out := make([][]int32, count)
	for i := range out {
		replicas := make([]int32, rf)
		for r := range replicas {
			replicas[r] = brokers[(from+i+r)%len(brokers)].NodeID
		}
		out[i] = replicas
	}
	return out
}
