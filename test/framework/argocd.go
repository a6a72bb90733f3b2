package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/gen/kindgen"
)

// ArgoHealthKeyPrefix starts every argocd-cm key that holds a custom health check; the rest
// of the key is "<group>_<Kind>". make manifests writes the keys (internal/gen/kindgen).
const ArgoHealthKeyPrefix = kindgen.ArgoHealthKeyPrefix

// argoHealthStatuses are the health codes Argo CD accepts from a script; it reports any other
// value as Unknown.
var argoHealthStatuses = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true,
	"Suspended": true, "Missing": true, "Unknown": true,
}

// ArgoHealth returns the health Argo CD shows for obj when script is its custom health check
// (config/argocd/health.lua). It reproduces what Argo CD does so that a test of the script
// tests what users see, not what a friendlier interpreter would make of it:
//
//   - An object with metadata.deletionTimestamp is "Progressing", "Pending deletion": Argo CD
//     decides that before it looks for a health check, so the script never runs.
//   - The script runs in gopher-lua (the interpreter Argo CD embeds) with only the package,
//     base and table libraries open, as for scripts from argocd-cm: a script that calls the
//     string library fails here as it would there. (Argo CD also opens a reduced os library;
//     the health check does not need it, so it is left out.) It has one second, as in Argo CD.
//   - The object is the global obj, converted as Argo CD converts it (see luaValue).
//   - The script's last value must be a table; its status must be one of Argo CD's health
//     codes, else the result is "Unknown", "Lua returned an invalid health status".
//
// err reports a script that fails or does not return a table (Argo CD shows Unknown with the
// error as message).
func ArgoHealth(script string, obj *unstructured.Unstructured) (status, message string, err error) {
	if obj.GetDeletionTimestamp() != nil {
		return "Progressing", "Pending deletion", nil
	}

	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)); err != nil {
			return "", "", fmt.Errorf("opening Lua library %q: %w", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)

	l.SetGlobal("obj", luaValue(l, obj.Object))
	if err := l.DoString(script); err != nil {
		return "", "", fmt.Errorf("health script: %w", err)
	}
	hs, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("health script returned %s, not a table", l.Get(-1).Type())
	}
	if status, err = luaString(hs, "status"); err != nil {
		return "", "", err
	}
	if message, err = luaString(hs, "message"); err != nil {
		return "", "", err
	}
	if !argoHealthStatuses[status] {
		return "Unknown", "Lua returned an invalid health status", nil
	}
	return status, message, nil
}

// luaString reads the string field key of the script's result. Argo CD decodes the result
// through JSON into a struct of strings, so a field of another type is an error there too;
// a missing field is "".
func luaString(t *lua.LTable, key string) (string, error) {
	switch v := t.RawGetString(key).(type) {
	case lua.LString:
		return string(v), nil
	case *lua.LNilType:
		return "", nil
	default:
		return "", fmt.Errorf("health script returned %s of type %s, not a string", key, v.Type())
	}
}

// luaValue converts a value of an unstructured object into Lua the way Argo CD does: objects
// become tables keyed by field name, arrays 1-based tables, numbers LNumber (a json.Number
// becomes a string, as in Argo CD), strings and booleans themselves. null becomes nil, which
// Lua cannot store: the field is absent, and a null array element is dropped, shifting the
// elements after it down one index.
func luaValue(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for key, item := range v {
			t.RawSetString(key, luaValue(l, item))
		}
		return t
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(luaValue(l, item))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case json.Number:
		return lua.LString(v)
	default:
		return lua.LNil
	}
}

// ArgoHealthScripts reads config/argocd/argocd-cm.yaml, the argocd-cm patch users apply, and
// returns its health checks keyed by "<group>_<Kind>" (the key without ArgoHealthKeyPrefix).
// Tests read the checks from there rather than from health.lua so that they test what users
// install. Any other data key is an error: Argo CD would silently ignore a misspelt one.
func ArgoHealthScripts() (map[string]string, error) {
	path := filepath.Join(RepoRoot(), "config", "argocd", "argocd-cm.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(data, cm); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	scripts := make(map[string]string, len(cm.Data))
	for key, script := range cm.Data {
		groupKind, ok := strings.CutPrefix(key, ArgoHealthKeyPrefix)
		if !ok || groupKind == "" {
			return nil, fmt.Errorf("%s: data key %q is not %s<group>_<Kind>", path, key, ArgoHealthKeyPrefix)
		}
		scripts[groupKind] = script
	}
	return scripts, nil
}
