package metadata

// SCRAM credentials, ACLs and client quotas. Keys and values are
// documented in doc.go ("Security"). Every value read back is bounded and
// validated; a corrupt one is logged and skipped by the listing calls and
// reported (ErrCorrupt) by the single-key reads.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-log/strata/auth"
)

// ErrNotFound: the credential (or other security record) to delete does not
// exist (Kafka: RESOURCE_NOT_FOUND).
var ErrNotFound = errors.New("metadata: not found")

const (
	// maxSecurityValue bounds a scram, acl or quota value before it is
	// decoded; the largest legitimate one (an ACL of three 4 KiB strings,
	// JSON-escaped) is well below.
	maxSecurityValue = 64 << 10
	// MaxQuotasPerEntity bounds the quota names one entity may carry.
	MaxQuotasPerEntity = 64
	// maxQuotaName bounds a quota name ("producer_byte_rate").
	maxQuotaName = 255
	// maxSecurityName bounds a SCRAM user, quota user or client id.
	maxSecurityName = auth.MaxMessageSize
	// securityOpsPerTxn keeps each transaction well under etcd's
	// --max-txn-ops (128 by default).
	securityOpsPerTxn = 64
	// defaultEntity is the entity-key spelling of a default user or client
	// id; named entities are query-escaped, so a name "<default>" encodes
	// as "%3Cdefault%3E" and cannot collide.
	defaultEntity = "<default>"
)

func (k keys) scramRoot() string { return k.prefix + "scram/" }
func (k keys) aclRoot() string   { return k.prefix + "acls/" }
func (k keys) quotaRoot() string { return k.prefix + "quotas/" }
func (k keys) scramUser(user string) string {
	return k.scramRoot() + url.PathEscape(user) + "/"
}

// validSecurityName: 1..maxSecurityName bytes of UTF-8.
func validSecurityName(s string) bool {
	return s != "" && len(s) <= maxSecurityName && utf8.ValidString(s)
}

// ---- SCRAM credentials ----

// scramRecord is the JSON of scram/<user>/<mechanism>; []byte fields are
// standard base64.
type scramRecord struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
}

func decodeScram(mech string, value []byte) (auth.ScramCredential, error) {
	if len(value) > maxSecurityValue {
		return auth.ScramCredential{}, fmt.Errorf("%w: scram value of %d bytes", ErrCorrupt, len(value))
	}
	var rec scramRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return auth.ScramCredential{}, fmt.Errorf("%w: scram credential: %v", ErrCorrupt, err)
	}
	c := auth.ScramCredential{Mechanism: mech, Salt: rec.Salt, Iterations: rec.Iterations,
		StoredKey: rec.StoredKey, ServerKey: rec.ServerKey}
	if err := c.Validate(); err != nil {
		return auth.ScramCredential{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return c, nil
}

// PutScramCredential stores (creates or replaces) user's credential for
// c.Mechanism.
func (s *Store) PutScramCredential(ctx context.Context, user string, c auth.ScramCredential) error {
	key, value, err := s.scramRecord(user, c)
	if err != nil {
		return err
	}
	_, err = s.txn(ctx, nil, []clientv3.Op{clientv3.OpPut(key, value)})
	return err
}

// CreateScramCredential stores user's credential for c.Mechanism only if
// there is none, in one etcd transaction: concurrent creators (brokers
// starting together) and a credential set meanwhile by an administrator
// are never overwritten. created reports whether this call stored it.
func (s *Store) CreateScramCredential(ctx context.Context, user string, c auth.ScramCredential) (created bool, err error) {
	key, value, err := s.scramRecord(user, c)
	if err != nil {
		return false, err
	}
	tr, err := s.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, value)})
	if err != nil {
		return false, err
	}
	return tr.Succeeded, nil
}

// scramRecord validates a credential and returns its key and value.
func (s *Store) scramRecord(user string, c auth.ScramCredential) (key, value string, err error) {
	if !validSecurityName(user) {
		return "", "", fmt.Errorf("%w: SCRAM user name must be 1..%d bytes of UTF-8", ErrInvalidConfig, maxSecurityName)
	}
	if err := c.Validate(); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	b, err := json.Marshal(scramRecord{Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey})
	if err != nil {
		return "", "", err
	}
	return s.keys.scramUser(user) + c.Mechanism, string(b), nil
}

// DeleteScramCredential deletes user's credential for mech; ErrNotFound if
// there is none.
func (s *Store) DeleteScramCredential(ctx context.Context, user, mech string) error {
	if !validSecurityName(user) {
		return fmt.Errorf("%w: SCRAM user %q", ErrNotFound, user)
	}
	tr, err := s.txn(ctx, nil, []clientv3.Op{clientv3.OpDelete(s.keys.scramUser(user) + mech)})
	if err != nil {
		return err
	}
	if tr.Responses[0].GetResponseDeleteRange().Deleted == 0 {
		return fmt.Errorf("%w: SCRAM credential %s of %q", ErrNotFound, mech, user)
	}
	return nil
}

// ScramCredential reads user's credential for mech; found false if absent.
// A stored value that fails validation is an ErrCorrupt error.
func (s *Store) ScramCredential(ctx context.Context, user, mech string) (auth.ScramCredential, bool, error) {
	if !validSecurityName(user) {
		return auth.ScramCredential{}, false, nil
	}
	if mech != auth.MechScramSHA256 && mech != auth.MechScramSHA512 {
		return auth.ScramCredential{}, false, fmt.Errorf("%w: %q", auth.ErrUnknownMechanism, mech)
	}
	resp, err := s.get(ctx, s.keys.scramUser(user)+mech)
	if err != nil || len(resp.Kvs) == 0 {
		return auth.ScramCredential{}, false, err
	}
	c, err := decodeScram(mech, resp.Kvs[0].Value)
	if err != nil {
		return auth.ScramCredential{}, false, fmt.Errorf("SCRAM credential of %q: %w", user, err)
	}
	return c, true, nil
}

// ScramUsers lists every user's credentials (mechanisms sorted). Corrupt
// entries are logged and skipped.
func (s *Store) ScramUsers(ctx context.Context) (map[string][]auth.ScramCredential, error) {
	resp, err := s.get(ctx, s.keys.scramRoot(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	users := map[string][]auth.ScramCredential{}
	for _, kv := range resp.Kvs {
		user, c, err := parseScramKV(strings.TrimPrefix(string(kv.Key), s.keys.scramRoot()), kv.Value)
		if err != nil {
			s.log.Error("skipping corrupt SCRAM credential", "key", string(kv.Key), "err", err)
			continue
		}
		users[user] = append(users[user], c)
	}
	return users, nil
}

// parseScramKV decodes "<escaped user>/<mechanism>" and its value.
func parseScramKV(rest string, value []byte) (string, auth.ScramCredential, error) {
	escaped, mech, ok := strings.Cut(rest, "/")
	user, err := url.PathUnescape(escaped)
	if !ok || err != nil || !validSecurityName(user) || url.PathEscape(user) != escaped {
		return "", auth.ScramCredential{}, fmt.Errorf("%w: SCRAM key %q", ErrCorrupt, rest)
	}
	c, err := decodeScram(mech, value)
	return user, c, err
}

// ---- ACLs ----

// aclRecord is the JSON of acls/<id>; enums are Kafka's codes.
type aclRecord struct {
	ResourceType auth.ResourceType `json:"resourceType"`
	ResourceName string            `json:"resourceName"`
	PatternType  auth.PatternType  `json:"patternType"`
	Principal    string            `json:"principal"`
	Host         string            `json:"host"`
	Operation    auth.Operation    `json:"operation"`
	Permission   auth.Permission   `json:"permission"`
}

func encodeACL(a auth.ACL) ([]byte, error) {
	return json.Marshal(aclRecord(a))
}

func decodeACL(value []byte) (auth.ACL, error) {
	if len(value) > maxSecurityValue {
		return auth.ACL{}, fmt.Errorf("%w: ACL value of %d bytes", ErrCorrupt, len(value))
	}
	var rec aclRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return auth.ACL{}, fmt.Errorf("%w: ACL: %v", ErrCorrupt, err)
	}
	a := auth.ACL(rec)
	if err := a.Validate(); err != nil {
		return auth.ACL{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return a, nil
}

// aclID is the key id of an ACL: the first 8 bytes of the SHA-256 of its
// canonical JSON, in hex. The same ACL always has the same key, which makes
// CreateACLs idempotent even between concurrent callers.
func aclID(value []byte) string {
	sum := sha256.Sum256(value)
	return hex.EncodeToString(sum[:8])
}

// storedACL is one ACL as read, with what a guarded delete needs.
type storedACL struct {
	key    string
	acl    auth.ACL
	modRev int64
}

// CreateACLs stores acls (each must pass Validate). An ACL already stored
// is not stored twice.
func (s *Store) CreateACLs(ctx context.Context, acls []auth.ACL) error {
	pending := map[string]string{} // key → value
	for _, a := range acls {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		value, err := encodeACL(a)
		if err != nil {
			return err
		}
		pending[s.keys.aclRoot()+aclID(value)] = string(value)
	}
	keys := make([]string, 0, len(pending))
	for k := range pending {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for chunk := range slices.Chunk(keys, securityOpsPerTxn) {
		if err := s.createACLChunk(ctx, chunk, pending); err != nil {
			return err
		}
	}
	return nil
}

// createACLChunk puts the keys of chunk that do not exist yet, guarded by
// "still absent"; a key that exists must hold the same ACL.
func (s *Store) createACLChunk(ctx context.Context, chunk []string, values map[string]string) error {
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		var cmps []clientv3.Cmp
		var puts []clientv3.Op
		for _, key := range chunk {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
			puts = append(puts, clientv3.OpPut(key, values[key]))
		}
		gets := make([]clientv3.Op, len(chunk))
		for i, key := range chunk {
			gets[i] = clientv3.OpGet(key)
		}
		tr, err := s.txn(ctx, cmps, puts, gets...)
		if err != nil || tr.Succeeded {
			return err
		}
		var absent []string
		for i, r := range tr.Responses {
			kvs := r.GetResponseRange().Kvs
			switch {
			case len(kvs) == 0:
				absent = append(absent, chunk[i])
			case string(kvs[0].Value) != values[chunk[i]]:
				return fmt.Errorf("%w: ACL id collision at %s", ErrCorrupt, chunk[i])
			}
		}
		if chunk = absent; len(chunk) == 0 {
			return nil
		}
	}
	return fmt.Errorf("%w: ACLs: too much contention", ErrCASFailed)
}

// ACLs returns every valid stored ACL (sorted by key) and the etcd revision
// read. Corrupt entries are logged and skipped.
func (s *Store) ACLs(ctx context.Context) ([]auth.ACL, int64, error) {
	stored, rev, err := s.storedACLs(ctx)
	if err != nil {
		return nil, 0, err
	}
	acls := make([]auth.ACL, len(stored))
	for i, st := range stored {
		acls[i] = st.acl
	}
	return acls, rev, nil
}

func (s *Store) storedACLs(ctx context.Context) ([]storedACL, int64, error) {
	resp, err := s.get(ctx, s.keys.aclRoot(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, 0, err
	}
	stored := make([]storedACL, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		a, err := decodeACL(kv.Value)
		if err != nil {
			s.log.Error("skipping corrupt ACL", "key", string(kv.Key), "err", err)
			continue
		}
		stored = append(stored, storedACL{key: string(kv.Key), acl: a, modRev: kv.ModRevision})
	}
	return stored, resp.Header.Revision, nil
}

// DeleteACLs deletes every stored ACL the filter matches and returns them.
// Each transaction deletes only ACLs unchanged since read, so what is
// returned is exactly what this call removed.
func (s *Store) DeleteACLs(ctx context.Context, filter auth.ACLFilter) ([]auth.ACL, error) {
	var deleted []auth.ACL
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		stored, _, err := s.storedACLs(ctx)
		if err != nil {
			return deleted, err
		}
		var matched []storedACL
		for _, st := range stored {
			if filter.Matches(st.acl) {
				matched = append(matched, st)
			}
		}
		done := true
		for chunk := range slices.Chunk(matched, securityOpsPerTxn) {
			ok, err := s.deleteACLChunk(ctx, chunk)
			if err != nil {
				return deleted, err
			}
			if !ok {
				done = false
				continue
			}
			for _, st := range chunk {
				deleted = append(deleted, st.acl)
			}
		}
		if done {
			return deleted, nil
		}
	}
	return deleted, fmt.Errorf("%w: ACLs: too much contention", ErrCASFailed)
}

func (s *Store) deleteACLChunk(ctx context.Context, chunk []storedACL) (bool, error) {
	cmps := make([]clientv3.Cmp, len(chunk))
	dels := make([]clientv3.Op, len(chunk))
	for i, st := range chunk {
		cmps[i] = clientv3.Compare(clientv3.ModRevision(st.key), "=", st.modRev)
		dels[i] = clientv3.OpDelete(st.key)
	}
	tr, err := s.txn(ctx, cmps, dels)
	if err != nil {
		return false, err
	}
	return tr.Succeeded, nil
}

// ---- quotas ----

// QuotaEntity names what a client quota applies to, as Kafka's
// ClientQuotaEntity: a user and/or a client id, each absent (empty and not
// default), named, or the default (DefaultUser / DefaultClientID, with the
// name empty).
type QuotaEntity struct {
	User, ClientID               string
	DefaultUser, DefaultClientID bool
}

// Validate: at least one component; a default has no name; names bounded.
func (e QuotaEntity) Validate() error {
	switch {
	case e.DefaultUser && e.User != "", e.DefaultClientID && e.ClientID != "":
		return fmt.Errorf("%w: quota entity %+v: a default entity has no name", ErrInvalidConfig, e)
	case e.User == "" && !e.DefaultUser && e.ClientID == "" && !e.DefaultClientID:
		return fmt.Errorf("%w: empty quota entity", ErrInvalidConfig)
	case len(e.User) > maxSecurityName || len(e.ClientID) > maxSecurityName:
		return fmt.Errorf("%w: quota entity name longer than %d bytes", ErrInvalidConfig, maxSecurityName)
	case !utf8.ValidString(e.User) || !utf8.ValidString(e.ClientID):
		return fmt.Errorf("%w: quota entity name is not UTF-8", ErrInvalidConfig)
	}
	return nil
}

// key encodes the entity as "user=<n>,client-id=<n>" (present components
// only, user first; names query-escaped; "<default>" for defaults).
func (e QuotaEntity) key() string {
	var parts []string
	if part := entityPart("user", e.User, e.DefaultUser); part != "" {
		parts = append(parts, part)
	}
	if part := entityPart("client-id", e.ClientID, e.DefaultClientID); part != "" {
		parts = append(parts, part)
	}
	return strings.Join(parts, ",")
}

func entityPart(kind, name string, isDefault bool) string {
	switch {
	case isDefault:
		return kind + "=" + defaultEntity
	case name != "":
		return kind + "=" + url.QueryEscape(name)
	}
	return ""
}

// parseQuotaEntity decodes an entity key; only the canonical encoding is
// accepted.
func parseQuotaEntity(key string) (QuotaEntity, error) {
	var e QuotaEntity
	for _, part := range strings.Split(key, ",") {
		kind, value, _ := strings.Cut(part, "=")
		name, err := url.QueryUnescape(value)
		if err != nil {
			return QuotaEntity{}, fmt.Errorf("%w: quota entity %q", ErrCorrupt, key)
		}
		isDefault := value == defaultEntity
		if isDefault {
			name = ""
		}
		switch kind {
		case "user":
			e.User, e.DefaultUser = name, isDefault
		case "client-id":
			e.ClientID, e.DefaultClientID = name, isDefault
		}
	}
	if e.Validate() != nil || e.key() != key {
		return QuotaEntity{}, fmt.Errorf("%w: quota entity %q", ErrCorrupt, key)
	}
	return e, nil
}

// validQuota: a printable name of 1..maxQuotaName bytes and a finite,
// non-negative value.
func validQuota(name string, value float64) error {
	if name == "" || len(name) > maxQuotaName {
		return fmt.Errorf("%w: quota name %q", ErrInvalidConfig, name)
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= ' ' || name[i] > '~' {
			return fmt.Errorf("%w: quota name %q", ErrInvalidConfig, name)
		}
	}
	if math.IsNaN(value) || math.IsInf(value, 0) || value < 0 {
		return fmt.Errorf("%w: quota %s = %v", ErrInvalidConfig, name, value)
	}
	return nil
}

func decodeQuotas(value []byte) (map[string]float64, error) {
	if len(value) > maxSecurityValue {
		return nil, fmt.Errorf("%w: quota value of %d bytes", ErrCorrupt, len(value))
	}
	var quotas map[string]float64
	if err := json.Unmarshal(value, &quotas); err != nil {
		return nil, fmt.Errorf("%w: quotas: %v", ErrCorrupt, err)
	}
	if len(quotas) == 0 || len(quotas) > MaxQuotasPerEntity {
		return nil, fmt.Errorf("%w: %d quotas, want 1..%d", ErrCorrupt, len(quotas), MaxQuotasPerEntity)
	}
	for name, v := range quotas {
		if err := validQuota(name, v); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
	return quotas, nil
}

// AlterQuotas sets and removes quotas of one entity in one CAS (Kafka's
// AlterClientQuotas entry); an entity left without quotas is deleted.
// Removing a quota that is not set is not an error.
func (s *Store) AlterQuotas(ctx context.Context, e QuotaEntity, set map[string]float64, remove []string) error {
	if err := e.Validate(); err != nil {
		return err
	}
	for name, v := range set {
		if err := validQuota(name, v); err != nil {
			return err
		}
	}
	key := s.keys.quotaRoot() + e.key()
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		ok, err := alterJSONMap(ctx, s, key, "quota", decodeQuotas, func(quotas map[string]float64) error {
			for _, name := range remove {
				delete(quotas, name)
			}
			for name, v := range set {
				quotas[name] = v
			}
			if len(quotas) > MaxQuotasPerEntity {
				return fmt.Errorf("%w: more than %d quotas on one entity", ErrInvalidConfig, MaxQuotasPerEntity)
			}
			return nil
		})
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("%w: quotas: too much contention", ErrCASFailed)
}

// alterJSONMap runs edit on the JSON object stored at key (empty when
// absent; a corrupt one is logged and replaced) and writes the result in
// one compare-and-swap on the key's ModRevision; an emptied object deletes
// the key. It reports false when another writer got in first (the caller
// retries), and returns edit's error unchanged. kind names the record in
// logs.
func alterJSONMap[V any](ctx context.Context, s *Store, key, kind string, decode func([]byte) (map[string]V, error),
	edit func(map[string]V) error,
) (bool, error) {
	resp, err := s.get(ctx, key)
	if err != nil {
		return false, err
	}
	m, modRev := map[string]V{}, int64(0)
	if len(resp.Kvs) == 1 {
		modRev = resp.Kvs[0].ModRevision
		if old, err := decode(resp.Kvs[0].Value); err == nil {
			m = old
		} else {
			s.log.Warn("replacing corrupt "+kind+" record", "key", key, "err", err)
		}
	}
	if err := edit(m); err != nil {
		return false, err
	}
	op := clientv3.OpDelete(key)
	if len(m) > 0 {
		value, err := json.Marshal(m)
		if err != nil {
			return false, err
		}
		op = clientv3.OpPut(key, string(value))
	}
	tr, err := s.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", modRev)}, []clientv3.Op{op})
	if err != nil {
		return false, err
	}
	return tr.Succeeded, nil
}

// Quotas returns every entity's quotas. Corrupt entries are logged and
// skipped.
func (s *Store) Quotas(ctx context.Context) (map[QuotaEntity]map[string]float64, error) {
	resp, err := s.get(ctx, s.keys.quotaRoot(), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[QuotaEntity]map[string]float64{}
	for _, kv := range resp.Kvs {
		e, err := parseQuotaEntity(strings.TrimPrefix(string(kv.Key), s.keys.quotaRoot()))
		var quotas map[string]float64
		if err == nil {
			quotas, err = decodeQuotas(kv.Value)
		}
		if err != nil {
			s.log.Error("skipping corrupt quota record", "key", string(kv.Key), "err", err)
			continue
		}
		out[e] = quotas
	}
	return out, nil
}

// ---- watching ----

// WatchSecurity delivers a value after any change under scram/, acls/ or
// quotas/, coalesced (the channel holds at most one; a consumer re-reads
// what it needs on each). Changes made after WatchSecurity returns are
// never missed, so a consumer calls it first, then loads, then reloads on
// every value. If the watch cannot be resumed exactly (etcd compacted, or
// it could not learn the starting revision) a value is sent as well. It
// reads the current revision before returning (one etcd call, bounded by
// RequestTimeout). The channel is closed when ctx ends or the store closes.
func (s *Store) WatchSecurity(ctx context.Context) <-chan struct{} {
	return s.watchPrefixes(ctx, s.keys.scramRoot(), s.keys.aclRoot(), s.keys.quotaRoot())
}

// watchPrefixes is a coalesced change signal for the keys under prefixes
// (see WatchSecurity for its guarantees).
func (s *Store) watchPrefixes(ctx context.Context, prefixes ...string) <-chan struct{} {
	out := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.baseCtx, cancel)
	start, err := s.currentRevision(ctx)
	if err != nil {
		s.log.Warn("metadata watch: cannot read the revision, will resync", "err", err)
		start = 0
	}
	var wg sync.WaitGroup
	for _, prefix := range prefixes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.watchSignal(ctx, prefix, start, out)
		}()
	}
	go func() {
		wg.Wait()
		stop()
		cancel()
		close(out)
	}()
	return out
}

func (s *Store) currentRevision(ctx context.Context) (int64, error) {
	resp, err := s.get(ctx, s.keys.clusterID(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// signal posts a coalesced notification.
func signal(out chan<- struct{}) {
	select {
	case out <- struct{}{}:
	default:
	}
}

// watchSignal watches prefix for changes after revision rev (0: unknown,
// which signals at once) until ctx ends, resuming after breaks.
func (s *Store) watchSignal(ctx context.Context, prefix string, rev int64, out chan<- struct{}) {
	for ctx.Err() == nil {
		if rev == 0 {
			current, err := s.currentRevision(ctx)
			if err != nil {
				sleepCtx(ctx, time.Second)
				continue
			}
			rev = current + 1
			signal(out)
		}
		next, err := s.watchSignalOnce(ctx, prefix, rev, out)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, rpctypes.ErrCompacted):
			rev = 0 // resync: the next loop signals and restarts from now
			continue
		case err != nil:
			s.log.Warn("metadata watch broke, resuming", "prefix", prefix, "revision", next, "err", err)
		}
		rev = next
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// watchSignalOnce runs one etcd watch from rev (> 0) and returns the
// revision to resume from.
func (s *Store) watchSignalOnce(ctx context.Context, prefix string, rev int64, out chan<- struct{}) (int64, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range s.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if err := resp.Err(); err != nil {
			return rev, err
		}
		if len(resp.Events) > 0 {
			signal(out)
		}
		if resp.Header.Revision >= rev {
			rev = resp.Header.Revision + 1
		}
	}
	return rev, nil
}
