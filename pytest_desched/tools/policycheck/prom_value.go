//go:build prom_value

package main

import (
	promapi "github.com/prometheus/client_golang/api"
	frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"
)

// promOptions for trees whose WithPrometheusClient takes the client itself (v0.33, v0.34): the client
// exists when the profile is built, or is nil.
func promOptions(prom promGetter) []frameworkprofile.Option {
	var client promapi.Client
	if prom != nil {
		client = prom()
	}
	return []frameworkprofile.Option{frameworkprofile.WithPrometheusClient(client)}
}
