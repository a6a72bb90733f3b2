// Command crdgen writes the CRD of every kind in watches.yaml, generated from the kind's
// chart (see internal/gen/crdgen), into the output directory. make manifests runs it:
//
//	go run ./hack/crdgen -watches watches.yaml -charts helm-charts -out config/crd/bases
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
)

func main() {
	watches := flag.String("watches", "watches.yaml", "the helm-operator's watches file")
	charts := flag.String("charts", "helm-charts", "directory of the charts; a watches entry's chart is looked up here by its base name")
	out := flag.String("out", "config/crd/bases", "directory to write the CRDs to, one <group>_<plural>.yaml each")
	flag.Parse()
	if err := run(*watches, *charts, *out); err != nil {
		fmt.Fprintln(os.Stderr, "crdgen:", err)
		os.Exit(1)
	}
}

func run(watches, charts, out string) error {
	files, err := crdgen.GenerateAll(watches, charts)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	wanted := map[string]bool{}
	for _, f := range files {
		wanted[f.Name] = true
		if err := os.WriteFile(filepath.Join(out, f.Name), f.Data, 0o644); err != nil {
			return err
		}
	}
	// Remove the CRDs of kinds no longer watched, recognised by the generator's header, so
	// that a file written by hand in the directory is left alone.
	entries, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if wanted[name] || e.IsDir() || !strings.HasSuffix(name, ".yaml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			return err
		}
		if bytes.HasPrefix(data, []byte(crdgen.Header)) {
			if err := os.Remove(filepath.Join(out, name)); err != nil {
				return err
			}
			fmt.Println("removed", filepath.Join(out, name))
		}
	}
	for _, f := range files {
		fmt.Println("wrote", filepath.Join(out, f.Name))
	}
	return nil
}
