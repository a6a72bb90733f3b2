// Command kindgen writes every file of the repository that lists the operator's kinds, from
// watches.yaml and the charts (see internal/gen/kindgen). make manifests runs it after
// hack/crdgen, from the repository root:
//
//	go run ./hack/kindgen
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"transwarp.io/tos/warpdrive-operator/internal/gen/kindgen"
)

func main() {
	o := kindgen.DefaultOptions(".")
	flag.StringVar(&o.Root, "root", o.Root, "the repository root; the other paths are relative to it")
	flag.StringVar(&o.Watches, "watches", o.Watches, "the helm-operator's watches file")
	flag.StringVar(&o.Charts, "charts", o.Charts, "directory of the charts; a watches entry's chart is looked up here by its base name")
	code := flag.String("code", strings.Join(o.CodeDirs, ","), "comma-separated directories whose Go files' +kubebuilder:rbac markers add to the rules on the custom resources")
	crds := flag.String("crds", strings.Join(o.CRDDirs, ","), "comma-separated directories of the CustomResourceDefinitions of other projects that the cluster serves, whose kinds charts may render")
	flag.Parse()
	o.CodeDirs = strings.Split(*code, ",")
	o.CRDDirs = strings.Split(*crds, ",")
	// What an administrator must decide (an undeclared cluster-scoped kind) goes to stderr and
	// does not fail the run: the kind just gets no rule.
	o.Warn = func(w string) { fmt.Fprintln(os.Stderr, "kindgen: warning:", w) }
	files, err := kindgen.Generate(o)
	if err == nil {
		var removed []string
		removed, err = kindgen.Write(o.Root, files)
		for _, r := range removed {
			fmt.Println("removed", r)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kindgen:", err)
		os.Exit(1)
	}
	for _, f := range files {
		fmt.Println("wrote", f.Path)
	}
}
