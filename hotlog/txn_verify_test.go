package hotlog

import (
	"errors"
	"testing"
)

// TestTxnVerificationGuard: a marker between the coordinator's answer and
// the append invalidates the verification (KIP-890 part 1), so a late
// batch cannot open a transaction; a confirmed one opens it, and batches of
// the ongoing transaction need no verification.
func TestTxnVerificationGuard(t *testing.T) {
	l := mustOpen(t, testConfig(t, t.TempDir()))
	defer l.Close()
	g, needed := l.StartTxnVerification(1, 0)
	if !needed || !l.ConfirmTxnVerification(1, g) {
		t.Fatalf("first verification: needed %v", needed)
	}
	mustAppend(t, l, txnBatch(t, 1, 0, 0, 1, 1), 1)
	if _, needed := l.StartTxnVerification(1, 0); needed {
		t.Fatal("verification needed while the transaction is ongoing")
	}
	mustAppend(t, l, MarkerBatch(1, 0, true, 5, 1), 1)
	// Verified, then the marker: the append is refused.
	g, _ = l.StartTxnVerification(1, 0)
	if !l.ConfirmTxnVerification(1, g) {
		t.Fatal("confirm")
	}
	mustAppend(t, l, MarkerBatch(1, 0, false, 5, 1), 1)
	if _, err := l.Append(txnBatch(t, 1, 0, 1, 1, 1), 1); !errors.Is(err, ErrTxnNotVerified) {
		t.Fatalf("append after the marker invalidated the verification: %v", err)
	}
	// Started, marker, then the answer: the confirmation is refused.
	g, _ = l.StartTxnVerification(1, 0)
	mustAppend(t, l, MarkerBatch(1, 0, false, 5, 1), 1)
	if l.ConfirmTxnVerification(1, g) {
		t.Fatal("confirmed a verification a marker invalidated")
	}
	// Started but never confirmed (the coordinator said no): refused.
	l.StartTxnVerification(1, 0)
	if _, err := l.Append(txnBatch(t, 1, 0, 1, 1, 1), 1); !errors.Is(err, ErrTxnNotVerified) {
		t.Fatalf("append of an unconfirmed verification: %v", err)
	}
	if _, open := firstTxnOffset(l, 1); open {
		t.Fatal("a refused batch opened a transaction")
	}
	// Producers never verified (internal writers) are not checked.
	mustAppend(t, l, txnBatch(t, 2, 0, 0, 1, 1), 1)
}

func firstTxnOffset(l *Log, pid int64) (int64, bool) {
	for _, s := range l.Producers() {
		if s.ProducerID == pid && s.CurrentTxnStartOffset >= 0 {
			return s.CurrentTxnStartOffset, true
		}
	}
	return -1, false
}
