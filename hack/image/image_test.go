package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// repoRoot is the build context of the project's Dockerfile.
const repoRoot = "../.."

// dockerfileLines returns the instructions of the Dockerfile's last stage as the test reads
// them, independently of parseRuntimeStage: one instruction a line (the runtime stage has no
// continuations), comments dropped.
func dockerfileLines(t *testing.T) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var stage [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if fields[0] == "FROM" {
			stage = nil
			continue
		}
		stage = append(stage, fields)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stage
}

// imageFile is one regular file of an image's flattened file system.
type imageFile struct {
	mode     int64
	uid, gid int
	data     []byte
}

// buildThroughTarball builds the Dockerfile's image with fake binaries and reads it back from
// the tarball that `ctr images import` would load.
func buildThroughTarball(t *testing.T, binaries map[string][]byte) v1.Image {
	t.Helper()
	out := t.TempDir()
	for name, data := range binaries {
		if err := os.WriteFile(filepath.Join(out, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	stage, err := parseRuntimeStage(f)
	if err != nil {
		t.Fatal(err)
	}
	img, err := dockerfileImage(stage, repoRoot, map[string]stageOutput{"builder": {Prefix: "/out", Dir: out}},
		"/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "image.tar")
	if err := tarball.WriteToFile(tarPath, name.MustParseReference("warpdrive-operator:test"), img); err != nil {
		t.Fatal(err)
	}
	read, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	return read
}

// files flattens the image's layers into its regular files, by absolute path.
func files(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	all := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return all
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		all[path.Clean("/"+h.Name)] = imageFile{mode: h.Mode, uid: h.Uid, gid: h.Gid, data: data}
	}
}

// TestImageHoldsWhatTheDockerfileCopies checks that the image built here holds exactly the
// files the Dockerfile's runtime stage copies (on top of the base's), with the same contents,
// and the stage's working directory, user and entrypoint.
func TestImageHoldsWhatTheDockerfileCopies(t *testing.T) {
	binaries := map[string][]byte{}
	want := map[string][]byte{}
	var workdir, user string
	var entrypoint []string
	for _, fields := range dockerfileLines(t) {
		switch fields[0] {
		case "WORKDIR":
			workdir = fields[1]
		case "USER":
			user = fields[1]
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.Join(fields[1:], " ")), &entrypoint); err != nil {
				t.Fatal(err)
			}
		case "COPY":
			args := fields[1:]
			from := ""
			if v, ok := strings.CutPrefix(args[0], "--from="); ok {
				from, args = v, args[1:]
			}
			if len(args) != 2 {
				t.Fatalf("the test reads COPY src dest only: %q", fields)
			}
			src, dest := args[0], args[1]
			if !strings.HasPrefix(dest, "/") {
				dest = path.Join(workdir, dest)
			}
			if from != "" {
				base := path.Base(src)
				binaries[base] = []byte("binary " + base)
				want[dest] = binaries[base]
				continue
			}
			walkContext(t, src, dest, want)
		default:
			t.Fatalf("the runtime stage has an instruction this test does not know: %q", fields)
		}
	}
	if len(want) == 0 || user == "" || len(entrypoint) == 0 {
		t.Fatalf("the Dockerfile's runtime stage was not read: files %d, user %q, entrypoint %q", len(want), user, entrypoint)
	}

	img := buildThroughTarball(t, binaries)
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != user || cfg.Config.WorkingDir != workdir ||
		strings.Join(cfg.Config.Entrypoint, " ") != strings.Join(entrypoint, " ") {
		t.Errorf("image config: user %q workdir %q entrypoint %q; the Dockerfile has %q, %q, %q",
			cfg.Config.User, cfg.Config.WorkingDir, cfg.Config.Entrypoint, user, workdir, entrypoint)
	}
	if cfg.OS != "linux" || cfg.Architecture == "" {
		t.Errorf("image platform %s/%s", cfg.OS, cfg.Architecture)
	}

	got := files(t, img)
	baseTree, err := base("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatal(err)
	}
	for p, e := range baseTree {
		if !e.dir {
			delete(got, p)
		}
	}
	for p, data := range want {
		f, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s: copied by the Dockerfile, missing from the image", p)
		case !bytes.Equal(f.data, data):
			t.Errorf("%s: content differs from its source", p)
		case f.uid != 0 || f.gid != 0:
			t.Errorf("%s: owned by %d:%d, COPY without --chown gives root", p, f.uid, f.gid)
		}
		delete(got, p)
	}
	for p := range got {
		t.Errorf("%s: in the image, not copied by the Dockerfile", p)
	}
}

// walkContext adds every file under the build context's src to want, at dest.
func walkContext(t *testing.T, src, dest string, want map[string][]byte) {
	t.Helper()
	root := filepath.Join(repoRoot, src)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if p == root { // a single file
			if strings.HasSuffix(dest, "/") {
				dest += filepath.Base(p)
			}
			want[dest] = data
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		want[path.Join(dest, filepath.ToSlash(rel))] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestImageUserCanRunIt checks what the pod's securityContext relies on: the numeric user of
// the image exists in its /etc/passwd, the entrypoint is executable, and /tmp (where the
// pod mounts its emptyDir) and the CA bundle are there.
func TestImageUserCanRunIt(t *testing.T) {
	img := buildThroughTarball(t, map[string][]byte{"manager": []byte("m")})
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	uid, _, _ := strings.Cut(cfg.Config.User, ":")
	got := files(t, img)
	if !strings.Contains(string(got["/etc/passwd"].data), ":x:"+uid+":") {
		t.Errorf("user %s is not in the image's /etc/passwd:\n%s", uid, got["/etc/passwd"].data)
	}
	entry := got[cfg.Config.Entrypoint[0]]
	if entry.mode&0o111 == 0 {
		t.Errorf("entrypoint %s is not executable (mode %o)", cfg.Config.Entrypoint[0], entry.mode)
	}
	if len(got[caBundle].data) == 0 {
		t.Errorf("no CA bundle at %s", caBundle)
	}
}

// TestRuntimeStageRejectsWhatItCannotBuild: an instruction of the last stage that the tool
// does not apply fails the build, while earlier stages may hold anything.
func TestRuntimeStageRejectsWhatItCannotBuild(t *testing.T) {
	for name, dockerfile := range map[string]string{
		"RUN":          "FROM a AS b\nRUN make\nFROM c\nRUN echo hi\n",
		"ENV":          "FROM c\nENV A=b\n",
		"COPY --chown": "FROM c\nCOPY --chown=1:1 a /a\n",
		"shell form":   "FROM c\nENTRYPOINT /manager --flag\n",
	} {
		if _, err := parseRuntimeStage(strings.NewReader(dockerfile)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	stage, err := parseRuntimeStage(strings.NewReader("ARG X\nFROM a AS b\nRUN \\\n  make\nFROM c\nWORKDIR /opt\nCOPY x y/\nUSER 1:1\nENTRYPOINT [\"/m\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if stage.Workdir != "/opt" || stage.User != "1:1" || len(stage.Copies) != 1 || stage.Copies[0].Dest != "/opt/y/" {
		t.Errorf("parsed %+v", stage)
	}
}

// TestPauseImage checks the sandbox image runs the pause binary.
func TestPauseImage(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(bin, []byte("pause"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := pauseImage(bin)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := files(t, img)["/pause"]; string(got.data) != "pause" || cfg.Config.Entrypoint[0] != "/pause" {
		t.Errorf("pause image: entrypoint %q, /pause %q", cfg.Config.Entrypoint, got.data)
	}
}
