//go:build prom_none

package main

import (
	promapi "github.com/prometheus/client_golang/api"
	frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"
)

// promOptions for trees with no WithPrometheusClient (v0.32 and before): no plugin reads
// Prometheus there.
func promOptions(func() promapi.Client) []frameworkprofile.Option { return nil }
