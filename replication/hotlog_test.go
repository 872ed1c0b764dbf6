package replication

import "github.com/strata-log/strata/hotlog"

// The broker passes its partition's *hotlog.Log as the LocalEpochs.
var _ LocalEpochs = (*hotlog.Log)(nil)
