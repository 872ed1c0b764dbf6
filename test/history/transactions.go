package history

import "fmt"

// TxnOutcome is what a transactional producer learnt about one transaction.
type TxnOutcome int8

const (
	// TxnUnknown: a commit was asked for and not confirmed (an error or no
	// answer); the transaction may have committed or aborted, but not in
	// part.
	TxnUnknown TxnOutcome = iota
	// TxnCommitted: EndTxn(commit) succeeded.
	TxnCommitted
	// TxnAborted: no commit was ever asked for (an abort, or the producer
	// died or was fenced with the transaction open), so no read_committed
	// reader may see any of its records.
	TxnAborted
)

func (o TxnOutcome) String() string {
	switch o {
	case TxnCommitted:
		return "committed"
	case TxnAborted:
		return "aborted"
	default:
		return "unknown"
	}
}

// EndTxn records the outcome of transaction txn (named in ProduceTxn).
// A later call replaces an earlier one.
func (h *History) EndTxn(txn string, outcome TxnOutcome) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.txns[txn] = outcome
}

// acked says the attempt counts as an acknowledged record: acknowledged and,
// if transactional, in a committed transaction.
func (c *checker) acked(a *Attempt) bool {
	return a.Outcome == Acked && (a.Txn == "" || c.in.Txns[a.Txn] == TxnCommitted)
}

// abortedValue says value was produced in an aborted transaction.
func (c *checker) abortedValue(value string) bool {
	a, ok := c.attempts[value]
	return ok && a.Txn != "" && c.in.Txns[a.Txn] == TxnAborted
}

// checkTxns: a transaction whose commit was not confirmed is visible in
// full or not at all. (Committed ones are covered by lost-write, aborted
// ones by aborted-read.) Records below the final read's log start cannot be
// vouched for and are left out.
func (c *checker) checkTxns() {
	type visibility struct {
		visible, hidden int
		first           *Attempt // first visible record
		txn             string
	}
	byTxn := map[string]*visibility{}
	var order []string
	for i := range c.in.Attempts {
		a := &c.in.Attempts[i]
		if a.Txn == "" || c.in.Txns[a.Txn] != TxnUnknown || (a.Outcome == Acked && a.Offset < c.logStart(a.Partition)) {
			continue
		}
		v := byTxn[a.Txn]
		if v == nil {
			v = &visibility{txn: a.Txn}
			byTxn[a.Txn] = v
			order = append(order, a.Txn)
		}
		if len(c.finalPos[a.Value]) > 0 {
			v.visible++
			if v.first == nil {
				v.first = a
			}
		} else {
			v.hidden++
		}
	}
	for _, txn := range order {
		if v := byTxn[txn]; v.visible > 0 && v.hidden > 0 {
			pos := c.finalPos[v.first.Value][0]
			c.add(TornTransaction, pos.partition, pos.offset, v.first.Value,
				"transaction %s (commit unconfirmed): %d of its %d records in the final read", txn, v.visible, v.visible+v.hidden)
		}
	}
}

// txnStats counts transactions by outcome and the records of committed ones.
func (c *checker) txnStats() {
	s := &c.report.Stats
	for _, o := range c.in.Txns {
		switch o {
		case TxnCommitted:
			s.TxnCommitted++
		case TxnAborted:
			s.TxnAborted++
		default:
			s.TxnUnknown++
		}
	}
	for i := range c.in.Attempts {
		if a := &c.in.Attempts[i]; a.Txn != "" && c.acked(a) {
			s.CommittedRecords++
		}
	}
}

func (s Stats) txnString() string {
	if s.TxnCommitted+s.TxnAborted+s.TxnUnknown == 0 {
		return ""
	}
	return fmt.Sprintf("; transactions: %d committed (%d records), %d aborted, %d unknown",
		s.TxnCommitted, s.CommittedRecords, s.TxnAborted, s.TxnUnknown)
}
