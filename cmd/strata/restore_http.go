package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/metadata"
)

// maxRestoreRequestBytes bounds a POST /v1/restore/topic body (about 200
// bytes of JSON per manifest entry).
const maxRestoreRequestBytes = 256 << 20

// restoreTopic serves POST /v1/restore/topic for `strata restore`: the
// body is a broker.RestoreTopicRequest, the answer a broker.RestoreResult.
// 409 when the topic (or its id) exists, 400 for a request the broker
// refuses, 503 before the broker runs with a bucket.
func (h *httpServer) restoreTopic(w http.ResponseWriter, r *http.Request) {
	src := h.tier.Load()
	if src == nil {
		http.Error(w, "broker not started, or started without --object-store", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRestoreRequestBytes+1))
	if err != nil || len(body) > maxRestoreRequestBytes {
		http.Error(w, "restore request unreadable or larger than 256 MiB", http.StatusBadRequest)
		return
	}
	var req broker.RestoreTopicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "restore request: "+err.Error(), http.StatusBadRequest)
		return
	}
	res, err := src.broker.RestoreTopic(r.Context(), req)
	switch {
	case errors.Is(err, metadata.ErrTopicExists):
		http.Error(w, err.Error(), http.StatusConflict)
	case err != nil:
		status := http.StatusInternalServerError
		if errors.Is(err, broker.ErrRestore) || errors.Is(err, metadata.ErrTierEntryInvalid) ||
			errors.Is(err, metadata.ErrInvalidConfig) || errors.Is(err, metadata.ErrInvalidPartitions) ||
			errors.Is(err, metadata.ErrInvalidTopic) {
			status = http.StatusBadRequest
		}
		h.log.Warn("restore request failed", "topic", req.Name, "err", err)
		http.Error(w, err.Error(), status)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	}
}
