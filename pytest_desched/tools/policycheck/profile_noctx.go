//go:build profile_noctx

package main

import (
	"context"

	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"
)

// newProfile for trees whose NewProfile takes no context (v0.33 and before): their plugins
// log through klog's global logger, pointed at the profile's sink while the profile is built.
func newProfile(ctx context.Context, profile api.DeschedulerProfile, idx int, d profileDeps) (cycler, error) {
	klog.SetLogger(klog.FromContext(ctx))
	defer klog.ClearLogger()
	p, err := frameworkprofile.NewProfile(profile, pluginregistry.PluginRegistry, profileOptions(idx, d)...)
	if err != nil {
		return nil, err
	}
	return p, nil
}
