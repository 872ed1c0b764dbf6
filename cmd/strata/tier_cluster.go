package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/metadata"
)

// The cluster scope of /v1/tier/status: the broker that is asked reads
// every live broker's own status (the default scope) over HTTP, at the
// address each one registered (metadata.BrokerInfo.HTTP), and merges the
// rows. Peers are asked for the default scope only, so one request never
// fans out twice, and a broker that predates the cluster scope still
// answers.
//
// Answer of GET /v1/tier/status?scope=cluster:
//
//	{"partitions":[{"node":1,"topic":"t","partition":0,"leader":true,...}, ...],
//	 "unreachable":[{"node":3,"http":"b3:9644","error":"..."}]}
//
// partitions has one row per (broker, partition) the broker holds, sorted
// by topic, partition and node; each row is that broker's
// broker.PartitionTierStatus plus its node id. unreachable lists the live
// brokers whose status is missing, and why.

// peerTierStatusTimeout bounds one peer's answer, so that a hung broker
// delays the cluster view by at most this much.
const peerTierStatusTimeout = 5 * time.Second

// errNoHTTPAddress: the broker registered no HTTP address (it predates
// --advertise-http).
var errNoHTTPAddress = errors.New("no HTTP address registered (a broker older than --advertise-http)")

// clusterTierStatus is the answer of the cluster scope.
type clusterTierStatus struct {
	Partitions  []nodeTierStatus    `json:"partitions"`
	Unreachable []unreachableBroker `json:"unreachable"`
}

// nodeTierStatus is one broker's status of one partition.
type nodeTierStatus struct {
	Node int32 `json:"node"`
	broker.PartitionTierStatus
}

// unreachableBroker is a live broker whose status is missing.
type unreachableBroker struct {
	Node  int32  `json:"node"`
	HTTP  string `json:"http,omitempty"` // "" when it registered none
	Error string `json:"error"`
}

// brokerAnswer is one broker's answer (or why there is none).
type brokerAnswer struct {
	info   metadata.BrokerInfo
	status []broker.PartitionTierStatus
	err    error
}

// tierStatusSource is what the cluster scope reads: this broker's status
// and its view of the live brokers (*broker.Broker implements it).
type tierStatusSource interface {
	NodeID() int32
	LiveBrokers() []metadata.BrokerInfo
	ReplicaTierStatus(topic string) []broker.PartitionTierStatus
}

// gatherTierStatus asks every live broker for its status of topic ("":
// all) in parallel, itself without a round trip, and merges the answers.
func gatherTierStatus(ctx context.Context, src tierStatusSource, topic string) clusterTierStatus {
	brokers := src.LiveBrokers()
	answers := make([]brokerAnswer, len(brokers))
	var wg sync.WaitGroup
	for i, info := range brokers {
		answers[i].info = info
		switch {
		case info.NodeID == src.NodeID():
			answers[i].status = src.ReplicaTierStatus(topic)
		case info.HTTP == "":
			answers[i].err = errNoHTTPAddress
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i].status, answers[i].err = fetchPeerTierStatus(ctx, info.HTTP, topic)
			}()
		}
	}
	wg.Wait()
	return mergeTierAnswers(answers)
}

// fetchPeerTierStatus reads one peer's own status.
func fetchPeerTierStatus(ctx context.Context, addr, topic string) ([]broker.PartitionTierStatus, error) {
	body, err := getBrokerJSON(ctx, addr, "/v1/tier/status", tierStatusQuery(topic, ""), peerTierStatusTimeout)
	if err != nil {
		return nil, err
	}
	var status []broker.PartitionTierStatus
	if err := json.Unmarshal(body, &status); err != nil {
		return nil, fmt.Errorf("/v1/tier/status: %w", err)
	}
	return status, nil
}

// mergeTierAnswers tags each answered row with its broker and lists the
// brokers that did not answer. Rows are sorted by topic, partition, node.
func mergeTierAnswers(answers []brokerAnswer) clusterTierStatus {
	out := clusterTierStatus{Partitions: []nodeTierStatus{}, Unreachable: []unreachableBroker{}}
	for _, a := range answers {
		if a.err != nil {
			out.Unreachable = append(out.Unreachable, unreachableBroker{Node: a.info.NodeID, HTTP: a.info.HTTP, Error: a.err.Error()})
			continue
		}
		for _, st := range a.status {
			out.Partitions = append(out.Partitions, nodeTierStatus{Node: a.info.NodeID, PartitionTierStatus: st})
		}
	}
	slices.SortFunc(out.Partitions, compareNodeRows)
	slices.SortFunc(out.Unreachable, func(x, y unreachableBroker) int { return cmp.Compare(x.Node, y.Node) })
	return out
}

func compareNodeRows(x, y nodeTierStatus) int {
	return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition), cmp.Compare(x.Node, y.Node))
}

// serveClusterTierStatus answers the cluster scope.
func serveClusterTierStatus(w http.ResponseWriter, r *http.Request, src tierStatusSource) {
	status := gatherTierStatus(r.Context(), src, r.URL.Query().Get("topic"))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(status)
}
