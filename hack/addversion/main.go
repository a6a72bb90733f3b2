// Command addversion adds an API version to a kind (see internal/gen/addversion). make
// add-version runs it from the repository root:
//
//	go run ./hack/addversion -kind WebApp -version v1beta1 [-chart path/to/chart[.tgz]]
package main

import (
	"flag"
	"fmt"
	"os"

	"transwarp.io/tos/warpdrive-operator/internal/gen/addversion"
)

func main() {
	o := addversion.Options{Root: "."}
	flag.StringVar(&o.Root, "root", o.Root, "the repository root")
	flag.StringVar(&o.Kind, "kind", "", "the kind, as watches.yaml names it, such as WebApp")
	flag.StringVar(&o.Version, "version", "", "the version to add, such as v1beta1")
	flag.StringVar(&o.Chart, "chart", "", "the new version's chart, a directory or a packaged chart (.tgz); empty keeps the kind's chart")
	flag.Parse()
	if o.Kind == "" || o.Version == "" {
		fmt.Fprintln(os.Stderr, "usage: make add-version KIND=<Kind> VERSION=<version> [CHART=<chart dir or .tgz>]")
		os.Exit(2)
	}
	r, err := addversion.Add(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "add-version:", err)
		os.Exit(1)
	}
	r.Print(os.Stdout)
}
