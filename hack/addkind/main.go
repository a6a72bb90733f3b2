// Command addkind makes an existing Helm chart a kind of the operator (see internal/gen/addkind).
// make add-kind runs it from the repository root:
//
//	go run ./hack/addkind -chart path/to/chart[.tgz] -kind WebApp -group apps.example.com -version v1alpha1
package main

import (
	"flag"
	"fmt"
	"os"

	"transwarp.io/tos/warpdrive-operator/internal/gen/addkind"
)

func main() {
	o := addkind.Options{Root: "."}
	flag.StringVar(&o.Root, "root", o.Root, "the repository root")
	flag.StringVar(&o.Chart, "chart", "", "the chart: a directory or a packaged chart (.tgz)")
	flag.StringVar(&o.Kind, "kind", "", "the kind, such as WebApp")
	flag.StringVar(&o.Group, "group", "", "the kind's API group, such as apps.example.com")
	flag.StringVar(&o.Version, "version", "v1alpha1", "the kind's API version")
	flag.Parse()
	if o.Chart == "" || o.Kind == "" || o.Group == "" {
		fmt.Fprintln(os.Stderr, "usage: make add-kind CHART=<chart dir or .tgz> KIND=<Kind> GROUP=<api group> [VERSION=v1alpha1]")
		os.Exit(2)
	}
	r, err := addkind.Add(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "add-kind:", err)
		os.Exit(1)
	}
	r.Print(os.Stdout)
}
