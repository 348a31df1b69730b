//go:build policy_noproviders

package main

import "sigs.k8s.io/descheduler/pkg/api"

// providerNeeds for trees whose DeschedulerPolicy has no MetricsProviders (v0.32 and before):
// only metricsCollector asks for metrics, and there is no Prometheus.
func providerNeeds(*api.DeschedulerPolicy) (bool, string) { return false, "" }

// providerNotes: no metrics providers, nothing to note.
func providerNotes(*api.DeschedulerPolicy) []string { return nil }
