//go:build !prom_none

package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	promapi "github.com/prometheus/client_golang/api"
)

// promGetter is what newDescheduler hands a profile for its Prometheus client.
type promGetter = func() promapi.Client

// refusingProm stands in for the Prometheus client newDescheduler would build: it never
// reaches a network.
type refusingProm struct{}

func (refusingProm) URL(string, map[string]string) *url.URL { return &url.URL{} }
func (refusingProm) Do(context.Context, *http.Request) (*http.Response, []byte, error) {
	return nil, nil, errors.New("policycheck: no Prometheus outside a live cluster")
}

var _ promapi.Client = refusingProm{}

// refusingPromGetter: the stand-in, where a policy configures a Prometheus URL.
func refusingPromGetter() promGetter { return func() promapi.Client { return refusingProm{} } }
