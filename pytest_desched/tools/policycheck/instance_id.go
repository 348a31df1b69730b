//go:build !profile_noid

package main

import (
	"fmt"

	frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"
)

// instanceOptions for trees with WithProfileInstanceID (v0.35 on): the profile's index, as
// newDescheduler gives it.
func instanceOptions(idx int) []frameworkprofile.Option {
	return []frameworkprofile.Option{frameworkprofile.WithProfileInstanceID(fmt.Sprintf("%d", idx))}
}
