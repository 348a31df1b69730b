//go:build profile_noctx

package main

import (
	"context"

	promapi "github.com/prometheus/client_golang/api"
	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"
)

// newProfile for releases whose NewProfile takes no context (v0.33 and before): their plugins
// log through klog's global logger, pointed at the profile's sink while the profile is built.
func newProfile(ctx context.Context, profile api.DeschedulerProfile, idx int, d profileDeps) (cycler, error) {
	var prom promapi.Client
	if d.prom != nil {
		prom = d.prom()
	}
	klog.SetLogger(klog.FromContext(ctx))
	defer klog.ClearLogger()
	p, err := frameworkprofile.NewProfile(profile, pluginregistry.PluginRegistry,
		frameworkprofile.WithClientSet(d.client),
		frameworkprofile.WithSharedInformerFactory(d.factory),
		frameworkprofile.WithPodEvictor(d.evictor),
		frameworkprofile.WithMetricsCollector(d.collector),
		frameworkprofile.WithPrometheusClient(prom),
	)
	if err != nil {
		return nil, err
	}
	return p, nil
}
