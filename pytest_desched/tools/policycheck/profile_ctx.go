//go:build !profile_noctx

package main

import (
	"context"

	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"
)

// newProfile for trees whose NewProfile takes a context (v0.34 on): plugins log through it.
func newProfile(ctx context.Context, profile api.DeschedulerProfile, idx int, d profileDeps) (cycler, error) {
	p, err := frameworkprofile.NewProfile(ctx, profile, pluginregistry.PluginRegistry, profileOptions(idx, d)...)
	if err != nil {
		return nil, err
	}
	return p, nil
}
