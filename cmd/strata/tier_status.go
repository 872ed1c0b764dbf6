package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/tier"
)

// `strata tier status`: the cluster's tier status, read from any broker's
// HTTP port (/v1/tier/status?scope=cluster, tier_cluster.go). By default
// one row per partition, its leader's: only the leader uploads, so its
// view of the upload and bucket lag is the one that counts. --replicas
// shows every broker's row, --broker-only the asked broker's own rows
// without asking the others.

// cliTierStatusTimeout bounds the whole request; the asked broker bounds
// each peer it asks by peerTierStatusTimeout.
const cliTierStatusTimeout = 30 * time.Second

// tierStatusView is which rows `strata tier status` shows.
type tierStatusView int

const (
	viewLeaders  tierStatusView = iota // one row per partition, its leader's
	viewReplicas                       // one row per broker and partition
	viewBroker                         // the asked broker's rows only
)

// tierRow is one row of the table and of --json.
type tierRow struct {
	nodeTierStatus
	// Replicas are the brokers that answered with this partition (the
	// leaders view only).
	Replicas []int32 `json:"replicas,omitempty"`
}

// tierStatusJSON is `strata tier status --json` (except --broker-only,
// which prints the broker's own array).
type tierStatusJSON struct {
	Partitions  []tierRow           `json:"partitions"`
	Unreachable []unreachableBroker `json:"unreachable"`
}

// runTier is `strata tier status|verify`.
func runTier(ctx context.Context, c *cli, args []string) error {
	if len(args) > 0 && args[0] == "verify" {
		return runTierVerify(ctx, c, args[1:])
	}
	if len(args) == 0 || args[0] != "status" {
		return usageErrorf("usage: strata tier status [--topic T] [--http host:port] [--replicas | --broker-only] [--all] [--json] | " +
			"strata tier verify --object-store URL [--http host:port] [--full]")
	}
	return runTierStatus(ctx, c, args[1:])
}

func runTierStatus(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("tier status", c)
	topic := fs.String("topic", "", "only this topic")
	httpAddr := fs.String("http", "127.0.0.1:9644", "any broker's --http `host:port`")
	replicas := fs.Bool("replicas", false, "a row per broker holding a partition, not only its leader's")
	brokerOnly := fs.Bool("broker-only", false, "only the partitions of the --http broker, without asking the other brokers")
	all := fs.Bool("all", false, "also the partitions of internal topics (__*) that hold no bytes")
	asJSON := jsonFlag(fs)
	positional, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(positional) > 0 {
		return usageErrorf("unexpected arguments %q", positional)
	}
	if *replicas && *brokerOnly {
		return usageErrorf("--replicas and --broker-only exclude each other")
	}
	opts := tierStatusOptions{topic: *topic, all: *all, json: *asJSON, view: viewLeaders}
	if *replicas {
		opts.view = viewReplicas
	}
	scope := tierScopeCluster
	if *brokerOnly {
		opts.view, scope = viewBroker, tierScopeBroker
	}
	body, err := getBrokerJSON(ctx, *httpAddr, "/v1/tier/status", tierStatusQuery(*topic, scope), cliTierStatusTimeout)
	if err != nil {
		return err
	}
	if scope == tierScopeCluster && bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		// A broker older than the cluster scope ignores it.
		fmt.Fprintf(c.stderr, "strata tier status: warning: the broker at %s answers only for itself (an older version): showing its partitions only\n", *httpAddr)
		opts.view = viewBroker
	}
	return opts.show(c, body)
}

// tierStatusOptions are the flags that shape the output.
type tierStatusOptions struct {
	topic string
	all   bool
	json  bool
	view  tierStatusView
}

// show decodes the broker's answer and prints it.
func (o tierStatusOptions) show(c *cli, body []byte) error {
	var status clusterTierStatus
	if o.view == viewBroker {
		var own []broker.PartitionTierStatus
		if err := json.Unmarshal(body, &own); err != nil {
			return fmt.Errorf("tier status: %w", err)
		}
		for _, st := range own {
			status.Partitions = append(status.Partitions, nodeTierStatus{Node: -1, PartitionTierStatus: st})
		}
	} else if err := json.Unmarshal(body, &status); err != nil {
		return fmt.Errorf("tier status: %w", err)
	}
	warnUnreachable(c.stderr, status.Unreachable)
	rows := selectTierRows(status.Partitions, o.view, o.all)
	if o.topic != "" && len(rows) == 0 {
		return fmt.Errorf("tier status: no partition of topic %q on any broker that answered", o.topic)
	}
	switch {
	case o.json && o.view == viewBroker:
		own := make([]broker.PartitionTierStatus, len(rows))
		for i, r := range rows {
			own[i] = r.PartitionTierStatus
		}
		return writeJSON(c.stdout, own)
	case o.json:
		return writeJSON(c.stdout, tierStatusJSON{Partitions: rows, Unreachable: nonNil(status.Unreachable)})
	}
	return printTierStatus(c.stdout, o.view, rows)
}

// warnUnreachable names on stderr each broker whose rows are missing.
func warnUnreachable(w io.Writer, unreachable []unreachableBroker) {
	for _, u := range unreachable {
		where := ""
		if u.HTTP != "" {
			where = " (" + u.HTTP + ")"
		}
		fmt.Fprintf(w, "strata tier status: warning: broker %d%s: no answer: %s\n", u.Node, where, u.Error)
	}
}

// selectTierRows picks the rows of view from rows (sorted by topic,
// partition, node, as mergeTierAnswers sorts them). Unless all is set, it
// drops the partitions of internal topics that hold no bytes on any broker
// that answered, locally or in the bucket: __consumer_offsets has dozens
// of them, mostly empty. The leaders view keeps one row per partition: the
// leader's, or when no broker that answered leads it, the first replica's
// (with Leader false).
func selectTierRows(rows []nodeTierStatus, view tierStatusView, all bool) []tierRow {
	out := []tierRow{}
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].Topic == rows[start].Topic && rows[end].Partition == rows[start].Partition {
			end++
		}
		group := rows[start:end]
		start = end
		if !all && hiddenPartition(group) {
			continue
		}
		if view != viewLeaders {
			for _, r := range group {
				out = append(out, tierRow{nodeTierStatus: r})
			}
			continue
		}
		shown := tierRow{nodeTierStatus: group[0]}
		for _, r := range group {
			shown.Replicas = append(shown.Replicas, r.Node)
			if r.Leader && !shown.Leader {
				shown.nodeTierStatus = r
			}
		}
		out = append(out, shown)
	}
	return out
}

// hiddenPartition: group (one partition's rows) is an internal topic's
// partition with no bytes anywhere.
func hiddenPartition(group []nodeTierStatus) bool {
	if !strings.HasPrefix(group[0].Topic, "__") {
		return false
	}
	for _, r := range group {
		if r.LocalBytes > 0 || r.TieredBytes > 0 {
			return false
		}
	}
	return true
}

// printTierStatus prints rows as a table, sizes and times in human units.
func printTierStatus(w io.Writer, view tierStatusView, rows []tierRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "TOPIC\tPARTITION\t%s\tLOG-START\tLOCAL-RANGE\tLOCAL-BYTES\tTIERED-RANGE\tOBJECTS\tTIERED-BYTES\t"+
		"UPLOAD-LAG\tBUCKET-LAG\tHELD\tCLEANED\tDIRTY\tERROR\n", viewHeader(view))
	for _, r := range rows {
		p := r.PartitionTierStatus
		tiered := "-"
		if p.Tiered {
			tiered = fmt.Sprintf("[%d, %d)", p.TieredStart, p.TieredEnd)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t[%d, %d)\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, viewColumns(view, r),
			p.LogStartOffset, p.LocalStart, p.LocalEnd, formatBytes(p.LocalBytes), tiered, p.Objects, formatBytes(p.TieredBytes),
			formatBytes(p.UploadLagBytes), bucketLagColumn(p), heldColumn(p.Held), cleanedRanges(p), dirtyColumn(p), p.LastError)
	}
	return tw.Flush()
}

func viewHeader(view tierStatusView) string {
	switch view {
	case viewLeaders:
		return "LEADER\tREPLICAS"
	case viewReplicas:
		return "BROKER\tROLE"
	}
	return "ROLE"
}

func viewColumns(view tierStatusView, r tierRow) string {
	role := "follower"
	if r.Leader {
		role = "leader"
	}
	switch view {
	case viewLeaders:
		leader := "-" // no broker that answered leads it
		if r.Leader {
			leader = strconv.Itoa(int(r.Node))
		}
		nodes := make([]string, len(r.Replicas))
		for i, n := range r.Replicas {
			nodes[i] = strconv.Itoa(int(n))
		}
		return leader + "\t" + strings.Join(nodes, ",")
	case viewReplicas:
		return fmt.Sprintf("%d\t%s", r.Node, role)
	}
	return role
}

// bucketLagColumn is how far the bucket is behind a partition this broker
// leads (time, bytes, and the bound), or "-" on a follower, which does not
// upload and cannot tell, and for a topic that is not tiered.
func bucketLagColumn(p broker.PartitionTierStatus) string {
	if !p.Leader || !p.RemoteStorage {
		return "-"
	}
	bound := "no bound"
	if p.UploadMaxLagMs > 0 {
		bound = "bound " + formatDuration(time.Duration(p.UploadMaxLagMs)*time.Millisecond)
	}
	lag := time.Duration(p.BucketLagMs) * time.Millisecond
	return fmt.Sprintf("%s %s (%s)", formatDuration(lag), formatBytes(p.BucketLagBytes), bound)
}

// heldColumn says what the retention hold keeps past retention, and for
// which groups (at their committed offsets).
func heldColumn(h tier.HeldStatus) string {
	if h.Objects == 0 {
		return "-"
	}
	groups := make([]string, len(h.By))
	for i, g := range h.By {
		groups[i] = fmt.Sprintf("%s@%d", g.Group, g.Offset)
	}
	return fmt.Sprintf("%d objects %s for %s", h.Objects, formatBytes(h.Bytes), strings.Join(groups, ","))
}

// cleanedRanges names the cleaned ranges of a compacted partition.
func cleanedRanges(p broker.PartitionTierStatus) string {
	if !p.Compacted {
		return "-"
	}
	local := fmt.Sprintf("local [%d, %d)", p.LocalStart, max(p.CleanedLocalEnd, p.LocalStart))
	if !p.Tiered {
		return local
	}
	return fmt.Sprintf("tiered [%d, %d) %s", p.TieredStart, p.CleanedTieredEnd, local)
}

func dirtyColumn(p broker.PartitionTierStatus) string {
	if !p.Compacted {
		return "-"
	}
	return fmt.Sprintf("%.0f%% (%s)", 100*p.DirtyRatio, formatBytes(p.DirtyBytes))
}

// tierStatusQuery is the query of /v1/tier/status (empty values left out).
func tierStatusQuery(topic, scope string) url.Values {
	q := url.Values{}
	if topic != "" {
		q.Set("topic", topic)
	}
	if scope != "" {
		q.Set("scope", scope)
	}
	return q
}

// getBrokerJSON GETs path?query from a broker's HTTP port within timeout,
// reading at most maxTierStatusBytes.
func getBrokerJSON(ctx context.Context, addr, path string, query url.Values, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := url.URL{Scheme: "http", Host: addr, Path: path, RawQuery: query.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, usageErrorf("--http %q: %v", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTierStatusBytes))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

// fetchBrokerJSON GETs path (with ?topic= when set) from the broker's
// HTTP port.
func fetchBrokerJSON(ctx context.Context, addr, path, topic string) ([]byte, error) {
	return getBrokerJSON(ctx, addr, path, tierStatusQuery(topic, ""), cliTierStatusTimeout)
}
