// Command httpcheck is the container healthcheck of the strata image: it
// GETs a URL and exits 0 on a 2xx answer, 1 otherwise. The image is a slim
// Debian without curl or wget, and Docker's HEALTHCHECK runs a command in
// the container, so this static binary does the one request it needs.
//
//	httpcheck [URL]
//
// URL defaults to http://127.0.0.1:9644/readyz (the broker's default --http
// port and its readiness probe); it waits 3 s at most.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

const (
	defaultURL = "http://127.0.0.1:9644/readyz"
	timeout    = 3 * time.Second
)

func main() {
	url := defaultURL
	switch len(os.Args) {
	case 1:
	case 2:
		url = os.Args[1]
	default:
		fmt.Fprintln(os.Stderr, "usage: httpcheck [URL]")
		os.Exit(2)
	}
	if err := check(url); err != nil {
		fmt.Fprintln(os.Stderr, "httpcheck:", err)
		os.Exit(1)
	}
}

// check GETs url and fails unless the status is 2xx; the body is the
// error text (/readyz says why it is not ready).
func check(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return nil
}
