//go:build !prom_value && !prom_none

package main

import frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"

// promOptions for trees whose WithPrometheusClient takes a getter (v0.35 on): the profile asks
// for the client when a plugin needs it.
func promOptions(prom promGetter) []frameworkprofile.Option {
	return []frameworkprofile.Option{frameworkprofile.WithPrometheusClient(prom)}
}
