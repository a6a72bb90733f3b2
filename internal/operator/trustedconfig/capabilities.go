package trustedconfig

import (
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
)

// capabilitiesTTL is how long the cluster's capabilities, once read, serve every release's
// actions. Helm reads them afresh for each action configuration (the server's version and a
// discovery of every API group), and the operator makes at least one per reconcile: in an
// edit wave of a thousand CRs, thousands of reads of the same answer. An API that appears
// meanwhile (another chart's CRD) shows in .Capabilities at most this late, and a release
// rendered without it is upgraded at its next reconcile, whose dry run sees it.
const capabilitiesTTL = 10 * time.Second

// sharedCapabilities are the cluster's capabilities as Helm reads them (its kube version and
// API versions), kept for capabilitiesTTL. Helm only reads a configuration's Capabilities,
// so one value serves every configuration at once.
type sharedCapabilities struct {
	mu   sync.Mutex
	caps *chartutil.Capabilities
	read time.Time
	now  func() time.Time // a test's clock; nil is time.Now
}

// get returns the capabilities, read through getter's discovery client when those kept are
// older than capabilitiesTTL. It returns nil if they cannot be read: Helm then reads them
// itself, and reports what went wrong.
func (s *sharedCapabilities) get(getter action.RESTClientGetter) *chartutil.Capabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	if s.caps != nil && now.Sub(s.read) < capabilitiesTTL {
		return s.caps
	}
	dc, err := getter.ToDiscoveryClient()
	if err != nil || dc == nil {
		return nil
	}
	// As Helm does: the discovery client is cached, and a new API must show.
	dc.Invalidate()
	version, err := dc.ServerVersion()
	if err != nil {
		return nil
	}
	apis, err := action.GetVersionSet(dc)
	if err != nil {
		// Helm goes on with a partial set when an API service is unavailable, with a
		// warning; keeping that set would hide the API for the whole TTL.
		return nil
	}
	s.caps = &chartutil.Capabilities{
		APIVersions: apis,
		KubeVersion: chartutil.KubeVersion{Version: version.GitVersion, Major: version.Major, Minor: version.Minor},
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
	}
	s.read = now
	return s.caps
}
