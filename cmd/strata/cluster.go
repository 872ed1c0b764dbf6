package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runCluster dispatches `strata cluster <verb>`: the cluster as a whole
// (its brokers, features and partition health) and the broker configs.
func runCluster(ctx context.Context, c *cli, args []string) error {
	return dispatchVerb(ctx, c, "cluster", map[string]verb{
		"info":    {clusterInfoCmd, "cluster id, controller, brokers, features, topic counts and partition health"},
		"config":  {clusterConfigCmd, "describe broker configs; set or delete dynamic ones"},
		"balance": {clusterBalanceCmd, "even out replicas and preferred leaders over the brokers (and racks)"},
	}, args)
}

// clusterInfo is what `cluster info` shows, the table's and the JSON's.
// Health comes from Metadata: a partition is under-replicated when its ISR
// is smaller than its replica set, and offline when it has no leader.
type clusterInfo struct {
	ClusterID       string           `json:"cluster_id"`
	Controller      int32            `json:"controller"` // -1: none known
	Brokers         []clusterBroker  `json:"brokers"`
	Features        []clusterFeature `json:"features"`
	Topics          int              `json:"topics"` // internal ones included
	InternalTopics  int              `json:"internal_topics"`
	Partitions      int              `json:"partitions"`
	UnderReplicated []partitionRef   `json:"under_replicated_partitions"`
	Offline         []partitionRef   `json:"offline_partitions"`
}

type clusterBroker struct {
	ID         int32   `json:"id"`
	Host       string  `json:"host"`
	Port       int32   `json:"port"`
	Rack       *string `json:"rack"`
	Controller bool    `json:"controller"`
	// APIs are the broker's ApiVersions answer. The protocol carries no
	// broker software version, and guessing a Kafka release from the
	// ranges misleads for a broker that implements a subset of the APIs.
	APIs  []apiVersionRange `json:"api_versions"`
	Error string            `json:"error,omitempty"` // ApiVersions failed
}

type apiVersionRange struct {
	Key  int16  `json:"key"`
	Name string `json:"name"`
	Min  int16  `json:"min"`
	Max  int16  `json:"max"`
}

// clusterFeature is a feature flag (KIP-584) as ApiVersions v3+ reports
// it: the range the broker supports and the cluster's finalized level.
type clusterFeature struct {
	Name           string `json:"name"`
	MinSupported   int16  `json:"min_supported"`
	MaxSupported   int16  `json:"max_supported"`
	FinalizedLevel *int16 `json:"finalized_level"` // null: not finalized (level 0) or not reported
}

// partitionRef names one partition in JSON output.
type partitionRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func clusterInfoCmd(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("cluster info", c)
	admin := adminFlags(fs, c)
	asJSON := jsonFlag(fs)
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return firstErr(err, usageErrorf("cluster info takes no arguments"))
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	md, err := adm.Metadata(ctx)
	if err != nil {
		return err
	}
	versions, err := adm.ApiVersions(ctx)
	if err != nil {
		return err
	}
	info := newClusterInfo(md, versions)
	if *asJSON {
		return writeJSON(c.stdout, info)
	}
	return printClusterInfo(c.stdout, info)
}

func newClusterInfo(md kadm.Metadata, versions kadm.BrokersApiVersions) clusterInfo {
	info := clusterInfo{ClusterID: md.Cluster, Controller: md.Controller, Brokers: []clusterBroker{},
		Features: []clusterFeature{}, UnderReplicated: []partitionRef{}, Offline: []partitionRef{}}
	// Finalized levels are cluster-wide; the supported ranges shown are the
	// first answering broker's (kadm sorts brokers by id).
	haveFeatures := false
	for _, b := range md.Brokers {
		cb := clusterBroker{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack, Controller: b.NodeID == md.Controller, APIs: []apiVersionRange{}}
		v, ok := versions[b.NodeID]
		switch {
		case !ok:
			cb.Error = "not asked"
		case v.Err != nil:
			cb.Error = v.Err.Error()
		default:
			v.EachKeySorted(func(key, lo, hi int16) {
				cb.APIs = append(cb.APIs, apiVersionRange{Key: key, Name: kmsg.NameForKey(key), Min: lo, Max: hi})
			})
			if !haveFeatures {
				haveFeatures, info.Features = true, features(v.Raw())
			}
		}
		info.Brokers = append(info.Brokers, cb)
	}
	slices.SortFunc(info.Brokers, func(x, y clusterBroker) int { return int(x.ID) - int(y.ID) })
	info.addHealth(md.Topics)
	return info
}

// features lists the supported feature ranges with the finalized levels.
// A finalized epoch of -1 means the broker has not loaded the levels yet.
func features(resp *kmsg.ApiVersionsResponse) []clusterFeature {
	out := []clusterFeature{}
	if resp == nil {
		return out
	}
	finalized := map[string]int16{}
	if resp.FinalizedFeaturesEpoch >= 0 {
		for _, f := range resp.FinalizedFeatures {
			finalized[f.Name] = f.MaxVersionLevel
		}
	}
	for _, f := range resp.SupportedFeatures {
		cf := clusterFeature{Name: f.Name, MinSupported: f.MinVersion, MaxSupported: f.MaxVersion}
		if level, ok := finalized[f.Name]; ok {
			cf.FinalizedLevel = &level
		}
		out = append(out, cf)
	}
	slices.SortFunc(out, func(x, y clusterFeature) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// addHealth counts topics and partitions and lists the partitions that are
// offline (no leader) or under-replicated (ISR smaller than the replicas).
// An offline partition is not also counted as under-replicated.
func (info *clusterInfo) addHealth(topics kadm.TopicDetails) {
	for _, t := range topics.Sorted() {
		if t.Err != nil {
			continue
		}
		info.Topics++
		if t.IsInternal {
			info.InternalTopics++
		}
		for _, p := range t.Partitions.Sorted() {
			info.Partitions++
			tp := partitionRef{Topic: t.Topic, Partition: p.Partition}
			switch {
			case p.Leader < 0 || errors.Is(p.Err, kerr.LeaderNotAvailable):
				info.Offline = append(info.Offline, tp)
			case len(p.ISR) < len(p.Replicas):
				info.UnderReplicated = append(info.UnderReplicated, tp)
			}
		}
	}
}

// maxListedUnhealthy bounds how many unhealthy partitions the table names,
// so the summary stays one screen; --json lists them all.
const maxListedUnhealthy = 10

func printClusterInfo(w io.Writer, info clusterInfo) error {
	fmt.Fprintf(w, "cluster id:  %s\n", info.ClusterID)
	fmt.Fprintf(w, "controller:  %d\n", info.Controller)
	fmt.Fprintf(w, "brokers:     %d\n", len(info.Brokers))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tADDRESS\tRACK\tAPIS")
	for _, b := range info.Brokers {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", b.ID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), derefOr(b.Rack, "-"), apiSummary(b))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "features:    %s\n", featureSummary(info.Features))
	fmt.Fprintf(w, "topics:      %d (%d internal), %d partitions\n", info.Topics, info.InternalTopics, info.Partitions)
	fmt.Fprintf(w, "health:      %d under-replicated, %d offline partitions\n", len(info.UnderReplicated), len(info.Offline))
	printUnhealthy(w, "offline", info.Offline)
	printUnhealthy(w, "under-replicated", info.UnderReplicated)
	return nil
}

// apiSummary is one broker's ApiVersions answer in a few words: how many
// APIs, and the ranges of Produce, Fetch and Metadata, which decide what
// clients can do; --json has every range.
func apiSummary(b clusterBroker) string {
	if b.Error != "" {
		return "ApiVersions failed: " + b.Error
	}
	parts := []string{fmt.Sprintf("%d APIs", len(b.APIs))}
	for _, a := range b.APIs {
		if a.Key == 0 || a.Key == 1 || a.Key == 3 {
			parts = append(parts, fmt.Sprintf("%s v%d-v%d", a.Name, a.Min, a.Max))
		}
	}
	return strings.Join(parts, ", ")
}

func featureSummary(fs []clusterFeature) string {
	if len(fs) == 0 {
		return "none reported"
	}
	var parts []string
	for _, f := range fs {
		level := "not finalized"
		if f.FinalizedLevel != nil {
			level = strconv.Itoa(int(*f.FinalizedLevel))
		}
		parts = append(parts, fmt.Sprintf("%s=%s (supported %d-%d)", f.Name, level, f.MinSupported, f.MaxSupported))
	}
	return strings.Join(parts, ", ")
}

func printUnhealthy(w io.Writer, what string, tps []partitionRef) {
	for i, tp := range tps {
		if i == maxListedUnhealthy {
			fmt.Fprintf(w, "  ... and %d more %s (--json lists all)\n", len(tps)-i, what)
			return
		}
		fmt.Fprintf(w, "  %s %s/%d\n", what, tp.Topic, tp.Partition)
	}
}

// clusterConfigCmd is `strata cluster config [set KEY=VALUE... | delete
// KEY...] [--broker N]`. Without --broker it works on the cluster-wide
// default resource (""), which every broker falls back to; with it, on one
// broker, whose own dynamic value wins over the cluster-wide one.
func clusterConfigCmd(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("cluster config [set KEY=VALUE... | delete KEY...]", c)
	conn := clientFlags(fs, c)
	resource := fs.String("broker", "", "broker `id` (default: the cluster-wide default configs)")
	asJSON := jsonFlag(fs)
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if id, err := strconv.ParseInt(*resource, 10, 32); *resource != "" && (err != nil || id < 0) {
		return usageErrorf("--broker %q: want a broker id", *resource)
	}
	action := "describe"
	if len(rest) > 0 {
		action, rest = rest[0], rest[1:]
	}
	var alters []kadm.AlterConfig
	switch action {
	case "describe":
		if len(rest) > 0 {
			return usageErrorf("cluster config takes no arguments but set or delete")
		}
	case "set", "delete":
		if alters, err = brokerConfigAlters(action, rest); err != nil {
			return err
		}
	default:
		return usageErrorf("cluster config: unknown action %q (want set or delete)", action)
	}
	cl, err := conn()
	if err != nil {
		return err
	}
	defer cl.Close()
	if alters != nil {
		return alterBrokerConfigs(ctx, c.stdout, kadm.NewClient(cl), *resource, alters)
	}
	return describeBrokerConfigs(ctx, c.stdout, cl, *resource, *asJSON)
}

// brokerConfigAlters turns `set k=v...` or `delete k...` into kadm's ops.
func brokerConfigAlters(action string, items []string) ([]kadm.AlterConfig, error) {
	if len(items) == 0 {
		return nil, usageErrorf("cluster config %s needs at least one config", action)
	}
	var alters []kadm.AlterConfig
	for _, item := range items {
		key, value, hasValue := strings.Cut(item, "=")
		switch {
		case key == "":
			return nil, usageErrorf("config %q: want key=value", item)
		case action == "set" && !hasValue:
			return nil, usageErrorf("config %q: set wants key=value", item)
		case action == "delete" && hasValue:
			return nil, usageErrorf("config %q: delete wants the config name alone", item)
		case action == "set":
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: key, Value: &value})
		default:
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: key})
		}
	}
	return alters, nil
}

// resourceLabel names a broker config resource for people.
func resourceLabel(resource string) string {
	if resource == "" {
		return "cluster-wide defaults"
	}
	return "broker " + resource
}

func alterBrokerConfigs(ctx context.Context, w io.Writer, adm *kadm.Client, resource string, alters []kadm.AlterConfig) error {
	var brokers []int32
	if resource != "" {
		id, _ := strconv.Atoi(resource)
		brokers = append(brokers, int32(id))
	}
	resps, err := adm.AlterBrokerConfigs(ctx, alters, brokers...)
	if err != nil {
		return fmt.Errorf("%s: %w", resourceLabel(resource), err)
	}
	return eachResult(w, resps, func(r kadm.AlterConfigsResponse) (string, error) {
		if r.Err != nil {
			return "", fmt.Errorf("%s: %w", resourceLabel(resource), withMessage(r.Err, r.ErrMessage))
		}
		return "altered " + resourceLabel(resource), nil
	})
}

// describeBrokerConfigs asks with a raw DescribeConfigs rather than kadm's,
// whose Config drops ReadOnly: which configs can change at run time is the
// point of this listing. kgo routes a broker resource to that broker.
func describeBrokerConfigs(ctx context.Context, w io.Writer, cl *kgo.Client, resource string, asJSON bool) error {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, resource
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("%s: %w", resourceLabel(resource), err)
	}
	if len(resp.Resources) != 1 {
		return fmt.Errorf("%s: the broker answered %d resources, want 1", resourceLabel(resource), len(resp.Resources))
	}
	r := resp.Resources[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return fmt.Errorf("%s: %w", resourceLabel(resource), withMessage(err, derefOr(r.ErrorMessage, "")))
	}
	configs := newBrokerConfigs(r.Configs)
	if asJSON {
		return writeJSON(w, configs)
	}
	return printBrokerConfigs(w, resource, configs)
}

// brokerConfig is a describedConfig with whether it can change at run time.
type brokerConfig struct {
	describedConfig
	Dynamic bool `json:"dynamic"` // settable with cluster config set
}

func newBrokerConfigs(raw []kmsg.DescribeConfigsResponseResourceConfig) []brokerConfig {
	out := make([]brokerConfig, 0, len(raw))
	for _, rc := range raw {
		kc := kadm.Config{Key: rc.Name, Value: rc.Value, Sensitive: rc.IsSensitive, Source: rc.Source}
		for _, syn := range rc.ConfigSynonyms {
			kc.Synonyms = append(kc.Synonyms, kadm.ConfigSynonym{Key: syn.Name, Value: syn.Value, Source: syn.Source})
		}
		out = append(out, brokerConfig{describedConfig: newDescribedConfigs([]kadm.Config{kc})[0], Dynamic: !rc.ReadOnly})
	}
	slices.SortFunc(out, func(x, y brokerConfig) int { return strings.Compare(x.Name, y.Name) })
	return out
}

func printBrokerConfigs(w io.Writer, resource string, configs []brokerConfig) error {
	if len(configs) == 0 {
		fmt.Fprintf(w, "%s: none set\n", resourceLabel(resource))
		if resource == "" {
			fmt.Fprintln(w, "(--broker N shows a broker's configs in force)")
		}
		return nil
	}
	fmt.Fprintf(w, "%s:\n", resourceLabel(resource))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tVALUE\tSOURCE\tDYNAMIC\tOVERRIDES")
	for _, cfg := range configs {
		dynamic := "no"
		if cfg.Dynamic {
			dynamic = "yes"
		}
		var below []string
		for _, syn := range cfg.Synonyms {
			below = append(below, fmt.Sprintf("%s=%s (%s)", syn.Name, derefOr(syn.Value, ""), syn.Source))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cfg.Name, derefOr(cfg.Value, "(sensitive)"), cfg.Source, dynamic, strings.Join(below, ", "))
	}
	return tw.Flush()
}
