// Command image builds the container images of the local cluster's real node without a
// container engine or registry, as tarballs that `ctr images import` loads:
//
//	image operator -dockerfile Dockerfile -context . -from builder:/out=bin/image -tag T -o F
//	image pause -binary bin/image/pause -tag T -o F
//
// The operator image follows the runtime stage of the project's Dockerfile: its COPY,
// WORKDIR, USER and ENTRYPOINT lines are applied on a distroless-like base (see base), and
// any other instruction there is an error. The binaries are built beforehand the way the
// Dockerfile's builder stage builds them (see the Makefile's image target).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// stageOutputs is the repeatable -from flag.
type stageOutputs map[string]stageOutput

func (s stageOutputs) String() string { return fmt.Sprint(map[string]stageOutput(s)) }

func (s stageOutputs) Set(v string) error {
	stage, out, err := parseStageOutput(v)
	if err != nil {
		return err
	}
	s[stage] = out
	return nil
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: image operator|pause [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	tag := fs.String("tag", "", "image reference to record in the tarball")
	out := fs.String("o", "", "output tarball")
	var build func() (v1.Image, error)
	switch args[0] {
	case "operator":
		dockerfile := fs.String("dockerfile", "Dockerfile", "the Dockerfile whose last stage is built")
		contextDir := fs.String("context", ".", "build context of COPY lines without --from")
		caFile := fs.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle for the base")
		outputs := stageOutputs{}
		fs.Var(outputs, "from", "stage:/prefix=dir: where the files of an earlier stage were built (repeatable)")
		build = func() (v1.Image, error) {
			f, err := os.Open(*dockerfile)
			if err != nil {
				return nil, err
			}
			defer func() { _ = f.Close() }()
			stage, err := parseRuntimeStage(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", *dockerfile, err)
			}
			return dockerfileImage(stage, *contextDir, outputs, *caFile)
		}
	case "pause":
		binary := fs.String("binary", "", "the pause binary (static)")
		build = func() (v1.Image, error) { return pauseImage(*binary) }
	default:
		return fmt.Errorf("unknown image %q: want operator or pause", args[0])
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *tag == "" || *out == "" {
		return fmt.Errorf("-tag and -o are required")
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		return err
	}
	img, err := build()
	if err != nil {
		return err
	}
	return tarball.WriteToFile(*out, ref, img)
}
