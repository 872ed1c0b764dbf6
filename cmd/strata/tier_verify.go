package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/objstore"
)

// errVerifyProblems: `strata tier verify` found problems (exit status 1).
var errVerifyProblems = errors.New("tier verify: problems found")

// verifyReport is the outcome of `strata tier verify`.
type verifyReport struct {
	entries, objects, pending int
	missing, badSize, corrupt []string
	orphans                   []string
	// unindexed counts objects of topic ids the cluster does not know
	// (another incarnation, or a cluster whose etcd was lost): not problems.
	unindexed    int
	unindexedIDs map[string]bool
}

func (r *verifyReport) problems() int {
	return len(r.missing) + len(r.badSize) + len(r.corrupt) + len(r.orphans)
}

// runTierVerify is `strata tier verify --object-store URL [--http host:port]
// [--full]`: every manifest entry (as the running broker holds it) is
// checked against its object — it exists, has the entry's size, its footer
// decodes with a good CRC and names the entry's partition and offsets (with
// --full the batches' CRC too, one GET of the whole object) — and every
// segment object in the bucket against the manifest: one the manifest does
// not name and that is not awaiting its delayed deletion is an orphan. Each
// broker knows only the deletions it queued (its own compactions and
// retention), so in a cluster --http lists every broker.
func runTierVerify(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("tier verify", c)
	httpAddr := fs.String("http", "127.0.0.1:9644",
		"the brokers' --http `host:port[,host:port...]`: the manifest of the first; the objects each has replaced and not yet deleted")
	store := fs.String("object-store", "", "the broker's --object-store `URL`")
	full := fs.Bool("full", false, "also read every object's batches and check their CRC")
	positional, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(positional) > 0 || *store == "" {
		return usageErrorf("usage: strata tier verify --object-store URL [--http host:port] [--full]")
	}
	view, err := fetchManifestViews(ctx, strings.Split(*httpAddr, ","))
	if err != nil {
		return err
	}
	bucket, err := tier.OpenExistingURL(ctx, *store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return usageErrorf("--object-store: %v", err)
	}
	report, err := verifyBucket(ctx, bucket, view, *full)
	if err != nil {
		return err
	}
	printVerifyReport(c.stdout, report)
	if report.problems() > 0 {
		return errVerifyProblems
	}
	return nil
}

// fetchManifestViews reads the manifest view of the first broker, with the
// pending deletions of every broker listed (each must answer: an object
// one of them is about to delete would otherwise count as an orphan).
func fetchManifestViews(ctx context.Context, addrs []string) (broker.TierManifestView, error) {
	var view broker.TierManifestView
	for i, addr := range addrs {
		body, err := fetchBrokerJSON(ctx, strings.TrimSpace(addr), "/v1/tier/manifest", "")
		if err != nil {
			return view, err
		}
		var v broker.TierManifestView
		if err := json.Unmarshal(body, &v); err != nil {
			return view, fmt.Errorf("tier verify: manifest of %s: %w", addr, err)
		}
		if i == 0 {
			view = v
			continue
		}
		view.PendingDeletes = append(view.PendingDeletes, v.PendingDeletes...)
	}
	return view, nil
}

// verifyBucket checks view against store.
func verifyBucket(ctx context.Context, store objstore.ObjectStore, view broker.TierManifestView, full bool) (*verifyReport, error) {
	objs, err := store.List(ctx, view.Cluster+"/topics/")
	if err != nil {
		return nil, fmt.Errorf("tier verify: listing the bucket: %w", err)
	}
	sizes := map[string]int64{}
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".seg") {
			sizes[o.Key] = o.Size
		}
	}
	r := &verifyReport{entries: len(view.Entries), objects: len(sizes)}
	named := map[string]bool{}
	for _, e := range view.Entries {
		named[e.Key] = true
		size, ok := sizes[e.Key]
		switch {
		case !ok:
			r.missing = append(r.missing, e.Key)
		case size != e.Size:
			r.badSize = append(r.badSize, fmt.Sprintf("%s (%d bytes, manifest says %d)", e.Key, size, e.Size))
		default:
			if err := verifyObject(ctx, store, e, full); err != nil {
				r.corrupt = append(r.corrupt, fmt.Sprintf("%s: %v", e.Key, err))
			}
		}
	}
	pending := map[string]bool{}
	for _, k := range view.PendingDeletes {
		pending[k] = true
	}
	live := map[string]bool{}
	for _, id := range view.LiveTopicIDs {
		live[id] = true
	}
	r.unindexedIDs = map[string]bool{}
	for key := range sizes {
		parts, err := tier.ParseSegmentKey(key)
		switch {
		case named[key]:
		case pending[key]:
			r.pending++
		case err == nil && !live[parts.TopicID.String()]:
			r.unindexed++
			r.unindexedIDs[parts.TopicID.String()] = true
		default:
			r.orphans = append(r.orphans, key)
		}
	}
	sort.Strings(r.orphans)
	return r, nil
}

// verifyObject reads an object's footer and indexes (CRC-checked by
// OpenObject) and compares them with its entry.
func verifyObject(ctx context.Context, store objstore.ObjectStore, e broker.TierManifestEntry, full bool) error {
	r, err := tier.OpenObject(ctx, store, e.Key, e.Size)
	if err != nil {
		return err
	}
	f := r.Index.Footer
	// A cleaned object's entry may claim a wider range than its batches
	// (tier/doc.go): the footer must lie inside the entry.
	if f.TopicID.String() != e.TopicID || f.Partition != e.Partition || f.BaseOffset < e.BaseOffset || f.LastOffset > e.LastOffset {
		return fmt.Errorf("footer %s-%d [%d, %d] does not match the entry %s-%d [%d, %d]",
			f.TopicID, f.Partition, f.BaseOffset, f.LastOffset, e.TopicID, e.Partition, e.BaseOffset, e.LastOffset)
	}
	if full {
		return tier.Verify(ctx, store, e.Key, f, true)
	}
	return nil
}

func printVerifyReport(w io.Writer, r *verifyReport) {
	fmt.Fprintf(w, "%d manifest entries, %d segment objects in the bucket (%d awaiting delayed deletion)\n",
		r.entries, r.objects, r.pending)
	if r.unindexed > 0 {
		fmt.Fprintf(w, "%d objects of %d topic ids this cluster does not have (other incarnations, or an index "+
			"lost with etcd: kept; `strata restore` can index them)\n", r.unindexed, len(r.unindexedIDs))
	}
	for _, section := range []struct {
		name string
		keys []string
	}{{"missing object", r.missing}, {"size mismatch", r.badSize}, {"corrupt object", r.corrupt}, {"orphan object", r.orphans}} {
		for _, k := range section.keys {
			fmt.Fprintf(w, "%s: %s\n", section.name, k)
		}
	}
	fmt.Fprintf(w, "%d problems: %d missing, %d size mismatches, %d corrupt, %d orphans\n",
		r.problems(), len(r.missing), len(r.badSize), len(r.corrupt), len(r.orphans))
}
