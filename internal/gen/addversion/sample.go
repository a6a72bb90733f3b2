package addversion

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/gen/kindgen"
)

// sampleHeader starts a sample make add-version converted.
const sampleHeader = "# The %s sample converted to %s by make add-version (the conversions of %s): edit it\n" +
	"# freely, make manifests does not overwrite it.\n"

// convertSample returns the path (relative to root) and content of the sample of the kind at
// its new version, converted with chain from its sample at prev, and the path of that one;
// "" when the kind has no sample at prev, or has one at the new version already. Otherwise make manifests would write a starter
// sample of the chart's defaults, and the one a person wrote would be left, unlisted: the
// converted sample keeps what they wrote, at the version users now create.
func convertSample(root string, gvk schema.GroupVersionKind, prev string, chain *conversion.Chain) (oldRel, newRel string, data []byte, err error) {
	old := gvk
	old.Version = prev
	oldRel = filepath.ToSlash(filepath.Join(kindgen.SamplesDir, kindgen.Kind{GVK: old}.SampleFile()))
	newRel = filepath.ToSlash(filepath.Join(kindgen.SamplesDir, kindgen.Kind{GVK: gvk}.SampleFile()))
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(newRel))); err == nil {
		return "", "", nil, nil // a person wrote it already
	}
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(oldRel)))
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil, nil
	}
	if err != nil {
		return "", "", nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(src, &obj); err != nil {
		return "", "", nil, fmt.Errorf("%s: %w", oldRel, err)
	}
	converted, err := chain.ConvertMap(obj, gvk.Version)
	if err != nil {
		return "", "", nil, fmt.Errorf("converting %s: %w", oldRel, err)
	}
	// A sample is created at the new version, never converted back: what the new version
	// has no place for is left out rather than kept in the annotation.
	if meta, ok := converted["metadata"].(map[string]any); ok {
		if annotations, ok := meta["annotations"].(map[string]any); ok {
			delete(annotations, conversion.Annotation)
			if len(annotations) == 0 {
				delete(meta, "annotations")
			}
		}
	}
	out, err := yaml.Marshal(converted)
	if err != nil {
		return "", "", nil, err
	}
	header := fmt.Sprintf(sampleHeader, prev, gvk.Version, conversion.FileName)
	return oldRel, newRel, append([]byte(header), out...), nil
}
