package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// pathEnv and caBundle are what distroless/static sets: the default PATH and the CA bundle
// that Go's crypto/x509 and other TLS clients look for.
const (
	pathEnv  = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	caBundle = "/etc/ssl/certs/ca-certificates.crt"
)

// base is the stand-in for gcr.io/distroless/static:nonroot, which cannot be pulled here:
// the users and groups root, nobody and nonroot (65532), a world-writable /tmp, nonroot's
// home, name-service settings, and the CA bundle read from caFile (Debian's
// ca-certificates). distroless also ships tzdata; the operator does not read time zones,
// so it is left out.
func base(caFile string) (tree, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA bundle (Debian package ca-certificates): %w", err)
	}
	t := tree{}
	t.addFile("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"+
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
	t.addFile("/etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"))
	t.addFile("/etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n"))
	t.addFile(caBundle, 0o644, ca)
	t.addDir("/tmp", 0o1777, 0, 0)
	t.addDir("/root", 0o700, 0, 0)
	t.addDir("/home/nonroot", 0o700, 65532, 65532)
	return t, nil
}

// stageOutput maps the files an earlier Dockerfile stage produced under Prefix (such as the
// builder's /out) to the host directory Dir where they were built instead.
type stageOutput struct {
	Prefix, Dir string
}

// parseStageOutput parses "stage:/prefix=dir".
func parseStageOutput(s string) (string, stageOutput, error) {
	stage, rest, ok := strings.Cut(s, ":")
	prefix, dir, ok2 := strings.Cut(rest, "=")
	if !ok || !ok2 || stage == "" || !strings.HasPrefix(prefix, "/") || dir == "" {
		return "", stageOutput{}, fmt.Errorf("want stage:/prefix=dir, got %q", s)
	}
	return stage, stageOutput{Prefix: cleanAbs(prefix), Dir: dir}, nil
}

// dockerfileImage builds the image of stage: base, then one layer with every file the stage
// copies (from contextDir, or from outputs for COPY --from), and the stage's working
// directory, user and entrypoint.
func dockerfileImage(stage runtimeStage, contextDir string, outputs map[string]stageOutput, caFile string) (v1.Image, error) {
	baseTree, err := base(caFile)
	if err != nil {
		return nil, err
	}
	files := tree{}
	if stage.Workdir != "" {
		files.addDir(stage.Workdir, 0o755, 0, 0)
	}
	for _, c := range stage.Copies {
		for _, src := range c.Sources {
			host, err := hostPath(c.From, src, contextDir, outputs)
			if err != nil {
				return nil, err
			}
			if err := files.copyFrom(host, c.Dest); err != nil {
				return nil, fmt.Errorf("COPY %s %s: %w", src, c.Dest, err)
			}
		}
	}
	return assemble([]tree{baseTree, files}, v1.Config{
		Env:        []string{pathEnv, "SSL_CERT_FILE=" + caBundle},
		User:       stage.User,
		WorkingDir: stage.Workdir,
		Entrypoint: stage.Entrypoint,
	})
}

// hostPath is where the source of a COPY is on this machine.
func hostPath(from, src, contextDir string, outputs map[string]stageOutput) (string, error) {
	if from == "" {
		rel := filepath.Clean(filepath.FromSlash(src))
		if filepath.IsAbs(rel) || strings.HasPrefix(rel, "..") {
			return "", fmt.Errorf("COPY source %q is outside the build context", src)
		}
		return filepath.Join(contextDir, rel), nil
	}
	out, ok := outputs[from]
	if !ok {
		return "", fmt.Errorf("COPY --from=%s: no -from %s:/prefix=dir given", from, from)
	}
	rel, ok := strings.CutPrefix(cleanAbs(src), out.Prefix+"/")
	if !ok {
		return "", fmt.Errorf("COPY --from=%s %s: not under %s", from, src, out.Prefix)
	}
	return filepath.Join(out.Dir, filepath.FromSlash(rel)), nil
}

// pauseImage is the pod sandbox image: the pause binary alone, run as the user upstream's
// pause image uses.
func pauseImage(binary string) (v1.Image, error) {
	t := tree{}
	if err := t.copyFrom(binary, "/pause"); err != nil {
		return nil, err
	}
	return assemble([]tree{t}, v1.Config{User: "65535:65535", Entrypoint: []string{"/pause"}})
}

// assemble stacks the layers on an empty image with cfg, for linux on this architecture.
func assemble(layers []tree, cfg v1.Config) (v1.Image, error) {
	img := empty.Image
	for _, t := range layers {
		l, err := t.layer()
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, err
		}
	}
	file, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	file = file.DeepCopy()
	file.OS = "linux"
	file.Architecture = runtime.GOARCH
	file.Config = cfg
	file.Created = v1.Time{Time: epoch}
	return mutate.ConfigFile(img, file)
}
