//go:build !policy_noproviders

package main

import (
	"fmt"

	"sigs.k8s.io/descheduler/pkg/api"
)

// providerNeeds: whether the policy's metricsProviders ask for metrics.k8s.io, and the
// Prometheus URL they name (trees whose DeschedulerPolicy has MetricsProviders: v0.33 on).
func providerNeeds(policy *api.DeschedulerPolicy) (bool, string) {
	kube, promURL := false, ""
	for _, p := range policy.MetricsProviders {
		if p.Source == api.KubernetesMetrics {
			kube = true
		}
		if p.Source == api.PrometheusMetrics && p.Prometheus != nil {
			promURL = p.Prometheus.URL
		}
	}
	return kube, promURL
}

// providerNotes: what only a live cluster can check about each metrics provider.
func providerNotes(policy *api.DeschedulerPolicy) []string {
	notes := []string{}
	for _, p := range policy.MetricsProviders {
		switch {
		case p.Source == api.PrometheusMetrics && p.Prometheus != nil:
			note := fmt.Sprintf("metricsProviders Prometheus at %s: reachability and each "+
				"plugin's query are checked by the descheduler only against the live server",
				redactURL(p.Prometheus.URL))
			if p.Prometheus.AuthToken != nil && p.Prometheus.AuthToken.SecretReference != nil {
				ref := p.Prometheus.AuthToken.SecretReference
				note += fmt.Sprintf("; its token is read from Secret %s/%s, which must exist "+
					"and be readable by the descheduler", ref.Namespace, ref.Name)
			}
			notes = append(notes, note)
		case p.Source == api.KubernetesMetrics:
			notes = append(notes, "metricsProviders KubernetesMetrics: the cluster must serve "+
				"metrics.k8s.io (metrics-server) to the descheduler")
		}
	}
	return notes
}
