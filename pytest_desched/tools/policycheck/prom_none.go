//go:build prom_none

package main

import frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"

// promGetter for trees with no WithPrometheusClient (v0.32 and before): they vendor no
// Prometheus client, and no plugin reads one.
type promGetter = func()

// refusingPromGetter: nothing to stand in for.
func refusingPromGetter() promGetter { return nil }

// promOptions: no option to pass.
func promOptions(promGetter) []frameworkprofile.Option { return nil }
