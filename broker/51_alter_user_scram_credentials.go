package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/metadata"
)

// AlterUserScramCredentials: v0. Needs Alter on the Cluster (every user
// CLUSTER_AUTHORIZATION_FAILED otherwise). One result per user named, in
// order of first appearance. A user's alterations are all checked first,
// as Kafka: an empty name or a bad salt / salted password is
// UNACCEPTABLE_CREDENTIAL, iterations outside 4096..16384 too, an unknown
// mechanism UNSUPPORTED_SASL_MECHANISM, the same (user, mechanism) twice
// DUPLICATE_RESOURCE, deleting a credential that does not exist
// RESOURCE_NOT_FOUND; a user with any error is left unchanged. Upsertions
// carry the salted password (Hi(password, salt, i)); only the derived
// StoredKey and ServerKey are stored (auth.ScramCredentialFromSalted).
// Each credential is one etcd write: a failure part way through a user's
// alterations leaves the earlier ones applied and answers the error.

// scramAlteration is one deletion (cred.Mechanism only) or upsertion of a
// user's credentials.
type scramAlteration struct {
	deletion bool
	mech     string
	cred     auth.ScramCredential
}

// scramUserChange is every alteration of one user, or the first error.
type scramUserChange struct {
	user       string
	alters     []scramAlteration
	code       int16
	msg        string
	mechanisms map[string]bool
}

func (b *Broker) handleAlterUserSCRAMCredentials(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	changes := collectScramChanges(req)
	allowed := b.authz.allowedCluster(rc, auth.OpAlter)
	for _, ch := range changes {
		if !allowed {
			ch.code, ch.msg = kerr.ClusterAuthorizationFailed.Code, ""
		}
		if ch.code == 0 {
			ch.code, ch.msg = applyScramChange(ctx, b.store, b.log, ch)
		}
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = ch.user, ch.code
		if ch.msg != "" {
			r.ErrorMessage = kmsg.StringPtr(ch.msg)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// collectScramChanges groups and checks the request's alterations by user.
func collectScramChanges(req *kmsg.AlterUserSCRAMCredentialsRequest) []*scramUserChange {
	var order []*scramUserChange
	byUser := map[string]*scramUserChange{}
	get := func(user string) *scramUserChange {
		ch, ok := byUser[user]
		if !ok {
			ch = &scramUserChange{user: user, mechanisms: map[string]bool{}}
			byUser[user] = ch
			order = append(order, ch)
		}
		return ch
	}
	for _, d := range req.Deletions {
		ch := get(d.Name)
		ch.add(d.Mechanism, func(mech string) (scramAlteration, int16, string) {
			return scramAlteration{deletion: true, mech: mech}, 0, ""
		})
	}
	for _, u := range req.Upsertions {
		ch := get(u.Name)
		ch.add(u.Mechanism, func(mech string) (scramAlteration, int16, string) {
			if u.Iterations < auth.MinIterations || u.Iterations > auth.MaxIterations {
				return scramAlteration{}, kerr.UnacceptableCredential.Code,
					fmt.Sprintf("iterations %d outside %d..%d", u.Iterations, auth.MinIterations, auth.MaxIterations)
			}
			cred, err := auth.ScramCredentialFromSalted(mech, u.Salt, int(u.Iterations), u.SaltedPassword)
			if err != nil {
				return scramAlteration{}, kerr.UnacceptableCredential.Code, err.Error()
			}
			return scramAlteration{mech: mech, cred: cred}, 0, ""
		})
	}
	return order
}

// add checks one alteration of the user and records it (or the user's
// first error).
func (ch *scramUserChange) add(mechCode int8, build func(mech string) (scramAlteration, int16, string)) {
	if ch.code != 0 {
		return
	}
	mech := scramMechanismName(mechCode)
	switch {
	case ch.user == "":
		ch.code, ch.msg = kerr.UnacceptableCredential.Code, "the user name must not be empty"
	case mech == "":
		ch.code, ch.msg = kerr.UnsupportedSaslMechanism.Code, fmt.Sprintf("unknown SCRAM mechanism %d", mechCode)
	case ch.mechanisms[mech]:
		ch.code, ch.msg = kerr.DuplicateResource.Code, "a user's credential for one mechanism is altered twice"
	}
	if ch.code != 0 {
		return
	}
	ch.mechanisms[mech] = true
	a, code, msg := build(mech)
	if code != 0 {
		ch.code, ch.msg = code, msg
		return
	}
	ch.alters = append(ch.alters, a)
}

// scramCredentialStore is the slice of the metadata store that
// AlterUserSCRAMCredentials reads and writes (*metadata.Store implements
// it).
type scramCredentialStore interface {
	ScramCredential(ctx context.Context, user, mech string) (auth.ScramCredential, bool, error)
	PutScramCredential(ctx context.Context, user string, c auth.ScramCredential) error
	DeleteScramCredential(ctx context.Context, user, mech string) error
}

// applyScramChange checks the user's deletions against etcd, then writes
// every alteration.
func applyScramChange(ctx context.Context, store scramCredentialStore, log *slog.Logger, ch *scramUserChange) (int16, string) {
	for _, a := range ch.alters {
		if !a.deletion {
			continue
		}
		_, ok, err := store.ScramCredential(ctx, ch.user, a.mech)
		if err != nil {
			return securityStoreErrorCode(err)
		}
		if !ok {
			return kerr.ResourceNotFound.Code, fmt.Sprintf("user %q has no %s credential", ch.user, a.mech)
		}
	}
	for _, a := range ch.alters {
		var err error
		if a.deletion {
			err = store.DeleteScramCredential(ctx, ch.user, a.mech)
		} else {
			err = store.PutScramCredential(ctx, ch.user, a.cred)
		}
		if errors.Is(err, metadata.ErrInvalidConfig) {
			return kerr.UnacceptableCredential.Code, err.Error()
		}
		if errors.Is(err, metadata.ErrNotFound) {
			return kerr.ResourceNotFound.Code, fmt.Sprintf("user %q has no %s credential", ch.user, a.mech)
		}
		if err != nil {
			return securityStoreErrorCode(err)
		}
	}
	log.Info("SCRAM credentials altered", "user", ch.user, "alterations", len(ch.alters))
	return 0, ""
}
