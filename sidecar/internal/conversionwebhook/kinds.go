package conversionwebhook

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// Kinds maps each served kind to the chain that converts its CRs between versions.
type Kinds map[schema.GroupKind]*conversion.Chain

// LoadKinds reads the conversions.yaml of each watched kind's chart, the chart directory
// taken relative to root (the helm-operator's working directory, where watches.yaml's chart
// paths start). A kind whose chart has none is not served: it has one version, or versions
// of one schema whose CRD needs no webhook. A malformed file, or one that does not list the
// version the helm-operator watches, is an error here, at start, rather than a failed read
// of a tenant's CR.
func LoadKinds(watches []watchfile.Watch, root string) (Kinds, error) {
	kinds := Kinds{}
	for _, w := range watches {
		dir := w.Chart
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(root, dir)
		}
		chain, err := conversion.Load(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("conversions of %s: %w", w.GroupVersionKind(), err)
		}
		if !slices.Contains(chain.Versions(), w.Version) {
			return nil, fmt.Errorf("conversions of %s: %s/%s lists versions %v, not the watched version %s",
				w.GroupVersionKind(), dir, conversion.FileName, chain.Versions(), w.Version)
		}
		kinds[w.GroupVersionKind().GroupKind()] = chain
	}
	return kinds, nil
}
