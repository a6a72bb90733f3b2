package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// runtimeStage is what the last stage of a Dockerfile puts into its image, as far as this
// tool supports it: files copied in, the working directory, the user and the entrypoint.
// Its base image (the stage's FROM) is replaced by base(), a distroless-like layer.
type runtimeStage struct {
	Workdir    string
	User       string
	Entrypoint []string
	Copies     []copyInstruction
	// unsupported lists the stage's other instructions: an error once the stage is known to
	// be the last one.
	unsupported []string
}

// copyInstruction is one COPY line: Sources from the build context, or from the output of
// an earlier stage when From is set, into Dest.
type copyInstruction struct {
	From    string
	Sources []string
	Dest    string
}

// parseRuntimeStage reads a Dockerfile and returns its last stage. An instruction of that
// stage that this tool does not apply (RUN, ENV, COPY --chown, ...) is an error rather than
// being skipped, so that the image built here cannot silently differ from the Dockerfile's.
func parseRuntimeStage(r io.Reader) (runtimeStage, error) {
	lines, err := logicalLines(r)
	if err != nil {
		return runtimeStage{}, err
	}
	var stage runtimeStage
	stages := 0
	for _, line := range lines {
		keyword, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(keyword) {
		case "FROM":
			stages++
			stage = runtimeStage{}
			continue
		case "ARG":
			if stages == 0 {
				continue // global build arguments, used by FROM lines only
			}
		}
		if stages == 0 {
			return runtimeStage{}, fmt.Errorf("%q before the first FROM", line)
		}
		switch strings.ToUpper(keyword) {
		case "WORKDIR":
			stage.Workdir = resolvePath(stage.Workdir, rest)
		case "USER":
			stage.User = rest
		case "ENTRYPOINT":
			var argv []string
			if err := json.Unmarshal([]byte(rest), &argv); err != nil {
				return runtimeStage{}, fmt.Errorf("ENTRYPOINT must be in exec (JSON) form: %q", rest)
			}
			stage.Entrypoint = argv
		case "COPY":
			c, err := parseCopy(rest, stage.Workdir)
			if err != nil {
				return runtimeStage{}, err
			}
			stage.Copies = append(stage.Copies, c)
		default:
			stage.unsupported = append(stage.unsupported, line)
		}
	}
	if stages == 0 {
		return runtimeStage{}, fmt.Errorf("no FROM line")
	}
	if len(stage.unsupported) > 0 {
		return runtimeStage{}, fmt.Errorf("instruction not supported in the runtime stage: %q", stage.unsupported[0])
	}
	return stage, nil
}

// parseCopy parses the arguments of COPY: [--from=stage] src... dest. A relative dest is
// relative to the working directory, as in Docker.
func parseCopy(args, workdir string) (copyInstruction, error) {
	var c copyInstruction
	fields := strings.Fields(args)
	for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
		flag, value, _ := strings.Cut(fields[0], "=")
		if flag != "--from" {
			return c, fmt.Errorf("COPY flag not supported: %s", fields[0])
		}
		c.From = value
		fields = fields[1:]
	}
	if len(fields) < 2 {
		return c, fmt.Errorf("COPY needs a source and a destination: %q", args)
	}
	c.Sources = fields[:len(fields)-1]
	dest := fields[len(fields)-1]
	c.Dest = resolvePath(workdir, dest)
	if strings.HasSuffix(dest, "/") || len(c.Sources) > 1 {
		c.Dest += "/"
	}
	return c, nil
}

// resolvePath resolves p against dir the way WORKDIR and COPY do.
func resolvePath(dir, p string) string {
	if strings.HasPrefix(p, "/") {
		return cleanAbs(p)
	}
	if dir == "" {
		dir = "/"
	}
	return cleanAbs(dir + "/" + p)
}

// logicalLines joins continuation lines and drops comments and blank lines.
func logicalLines(r io.Reader) ([]string, error) {
	var lines []string
	var current strings.Builder
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if strings.HasPrefix(line, "#") || (line == "" && current.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			current.WriteString(cont)
			current.WriteString(" ")
			continue
		}
		current.WriteString(line)
		lines = append(lines, strings.TrimSpace(current.String()))
		current.Reset()
	}
	return lines, scanner.Err()
}
