//go:build !profile_noctx

package main

import (
	"context"
	"fmt"

	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"
)

// newProfile for releases whose NewProfile takes a context (v0.34 on): plugins log through it.
func newProfile(ctx context.Context, profile api.DeschedulerProfile, idx int, d profileDeps) (cycler, error) {
	p, err := frameworkprofile.NewProfile(ctx, profile, pluginregistry.PluginRegistry,
		frameworkprofile.WithClientSet(d.client),
		frameworkprofile.WithSharedInformerFactory(d.factory),
		frameworkprofile.WithPodEvictor(d.evictor),
		frameworkprofile.WithMetricsCollector(d.collector),
		frameworkprofile.WithPrometheusClient(d.prom),
		frameworkprofile.WithProfileInstanceID(fmt.Sprintf("%d", idx)),
	)
	if err != nil {
		return nil, err
	}
	return p, nil
}
