//go:build profile_noid

package main

import frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"

// instanceOptions for trees without WithProfileInstanceID (v0.34 and before): none.
func instanceOptions(int) []frameworkprofile.Option { return nil }
