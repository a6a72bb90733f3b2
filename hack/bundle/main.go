// Command bundle builds and validates the operator's OLM bundle (make bundle), as
// `operator-sdk generate bundle` and `operator-sdk bundle validate` would: operator-sdk itself
// cannot be installed from the Go module proxy (it refuses the module), so this uses the
// library operator-sdk validates with, github.com/operator-framework/api.
//
//	kustomize build config/manifests | bundle generate -version 0.1.0 -out bundle
//	bundle validate bundle
//
// generate writes the registry+v1 layout: manifests/ (the ClusterServiceVersion, the CRDs and
// the other objects OLM installs), metadata/annotations.yaml, tests/scorecard/config.yaml,
// and bundle.Dockerfile next to the bundle directory.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	semver "github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bundle generate [flags] < manifests | bundle validate DIR")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "generate":
		fs := flag.NewFlagSet("generate", flag.ExitOnError)
		var o options
		fs.StringVar(&o.version, "version", "0.0.1", "Version of the operator (semver).")
		fs.StringVar(&o.pkg, "package", "warpdrive-operator", "OLM package name.")
		fs.StringVar(&o.channels, "channels", "alpha", "Comma-separated channels of the bundle.")
		fs.StringVar(&o.defaultChannel, "default-channel", "alpha", "Default channel of the package.")
		fs.StringVar(&o.out, "out", "bundle", "Bundle directory; bundle.Dockerfile goes next to it.")
		_ = fs.Parse(os.Args[2:])
		err = generate(os.Stdin, o)
	case "validate":
		if len(os.Args) != 3 {
			err = errors.New("usage: bundle validate DIR")
			break
		}
		err = validate(os.Args[2])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
}

type options struct {
	version, pkg, channels, defaultChannel, out string
}

// readObjects decodes a stream of YAML documents.
func readObjects(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func convert(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

func generate(r io.Reader, o options) error {
	objs, err := readObjects(r)
	if err != nil {
		return err
	}
	var (
		csv         *v1alpha1.ClusterServiceVersion
		deployments []appsv1.Deployment
		crds        []*unstructured.Unstructured
		roles       = map[string][]rbacv1.PolicyRule{} // "Role/name" or "ClusterRole/name"
		bindings    []*unstructured.Unstructured
		scorecard   *unstructured.Unstructured
		others      []*unstructured.Unstructured
		crGroups    = map[string]bool{}
		crs         []*unstructured.Unstructured
	)
	for _, u := range objs {
		switch u.GetKind() {
		case "ClusterServiceVersion":
			csv = &v1alpha1.ClusterServiceVersion{}
			if err := convert(u, csv); err != nil {
				return err
			}
		case "Deployment":
			var d appsv1.Deployment
			if err := convert(u, &d); err != nil {
				return err
			}
			deployments = append(deployments, d)
		case "CustomResourceDefinition":
			crds = append(crds, u)
			group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
			crGroups[group] = true
		case "Role", "ClusterRole":
			var cr rbacv1.ClusterRole // a Role has the same fields
			if err := convert(u, &cr); err != nil {
				return err
			}
			roles[u.GetKind()+"/"+u.GetName()] = cr.Rules
			others = append(others, u)
		case "RoleBinding", "ClusterRoleBinding":
			bindings = append(bindings, u)
		case "Configuration":
			scorecard = u
		case "Namespace", "ServiceAccount":
			// OLM installs into the namespace the user chooses and creates the
			// ServiceAccounts the install strategy names.
		default:
			others = append(others, u)
		}
	}
	// The samples: objects of the CRDs' groups.
	var rest []*unstructured.Unstructured
	for _, u := range others {
		if group := strings.Split(u.GetAPIVersion(), "/")[0]; crGroups[group] && strings.Contains(u.GetAPIVersion(), "/") {
			crs = append(crs, u)
			continue
		}
		rest = append(rest, u)
	}
	others = rest
	if csv == nil || len(deployments) == 0 {
		return errors.New("the input has no ClusterServiceVersion base or no Deployment")
	}

	// The install strategy: the Deployments, and the rules of the roles bound to their
	// ServiceAccounts. Bound roles and their bindings live in the CSV, not as objects.
	strategy := v1alpha1.StrategyDetailsDeployment{}
	serviceAccounts := map[string]bool{}
	for _, d := range deployments {
		strategy.DeploymentSpecs = append(strategy.DeploymentSpecs, v1alpha1.StrategyDeploymentSpec{
			Name: d.Name, Label: d.Labels, Spec: d.Spec,
		})
		serviceAccounts[d.Spec.Template.Spec.ServiceAccountName] = true
	}
	consumed := map[string]bool{}
	for _, b := range bindings {
		var rb rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
		if err := convert(b, &rb); err != nil {
			return err
		}
		key := rb.RoleRef.Kind + "/" + rb.RoleRef.Name
		rules, ok := roles[key]
		var sa string
		for _, s := range rb.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && serviceAccounts[s.Name] {
				sa = s.Name
			}
		}
		if !ok || sa == "" {
			others = append(others, b)
			continue
		}
		perm := v1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa, Rules: rules}
		if b.GetKind() == "RoleBinding" {
			strategy.Permissions = append(strategy.Permissions, perm)
		} else {
			strategy.ClusterPermissions = append(strategy.ClusterPermissions, perm)
		}
		consumed[key] = true
	}
	rest = nil
	for _, u := range others {
		if !consumed[u.GetKind()+"/"+u.GetName()] {
			rest = append(rest, u)
		}
	}
	others = rest

	csv.Name = o.pkg + ".v" + o.version
	v, err := semver.Parse(o.version)
	if err != nil {
		return fmt.Errorf("version %q: %w", o.version, err)
	}
	csv.Spec.Version = version.OperatorVersion{Version: v}
	csv.Spec.InstallStrategy = v1alpha1.NamedInstallStrategy{StrategyName: v1alpha1.InstallStrategyNameDeployment, StrategySpec: strategy}
	if csv.Annotations == nil {
		csv.Annotations = map[string]string{}
	}
	csv.Annotations["containerImage"] = deployments[0].Spec.Template.Spec.Containers[0].Image
	csv.Annotations["operators.operatorframework.io/builder"] = "warpdrive-operator/hack/bundle"
	examples := make([]map[string]any, 0, len(crs))
	for _, cr := range crs {
		examples = append(examples, cr.Object)
	}
	sort.Slice(examples, func(i, j int) bool { return fmt.Sprint(examples[i]["kind"]) < fmt.Sprint(examples[j]["kind"]) })
	almExamples, err := json.MarshalIndent(examples, "", "  ")
	if err != nil {
		return err
	}
	csv.Annotations["alm-examples"] = string(almExamples)
	csv.Spec.CustomResourceDefinitions.Owned = nil
	for _, u := range crds {
		var crd apiextv1.CustomResourceDefinition
		if err := convert(u, &crd); err != nil {
			return err
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			desc := ""
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				desc = v.Schema.OpenAPIV3Schema.Description
			}
			csv.Spec.CustomResourceDefinitions.Owned = append(csv.Spec.CustomResourceDefinitions.Owned, v1alpha1.CRDDescription{
				Name: crd.Name, Version: v.Name, Kind: crd.Spec.Names.Kind, DisplayName: crd.Spec.Names.Kind, Description: desc,
			})
		}
	}
	sort.Slice(csv.Spec.CustomResourceDefinitions.Owned, func(i, j int) bool {
		return csv.Spec.CustomResourceDefinitions.Owned[i].Name < csv.Spec.CustomResourceDefinitions.Owned[j].Name
	})

	// Write the bundle afresh, so that nothing of an earlier one stays.
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	manifestsDir := filepath.Join(o.out, "manifests")
	// Through JSON, which the CSV's version type marshals itself to.
	csv.APIVersion, csv.Kind = v1alpha1.SchemeGroupVersion.String(), "ClusterServiceVersion"
	data, err := json.Marshal(csv)
	if err != nil {
		return err
	}
	csvU := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &csvU.Object); err != nil {
		return err
	}
	unstructured.RemoveNestedField(csvU.Object, "status")
	unstructured.RemoveNestedField(csvU.Object, "metadata", "creationTimestamp")
	if err := writeYAML(filepath.Join(manifestsDir, o.pkg+".clusterserviceversion.yaml"), csvU.Object); err != nil {
		return err
	}
	for _, u := range crds {
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
		if err := writeYAML(filepath.Join(manifestsDir, group+"_"+plural+".yaml"), u.Object); err != nil {
			return err
		}
	}
	for _, u := range others {
		// OLM creates namespaced objects in the namespace the operator is installed in.
		u.SetNamespace("")
		gv := strings.ReplaceAll(u.GetAPIVersion(), "/", "_")
		name := fmt.Sprintf("%s_%s_%s.yaml", u.GetName(), gv, strings.ToLower(u.GetKind()))
		if err := writeYAML(filepath.Join(manifestsDir, name), u.Object); err != nil {
			return err
		}
	}
	if scorecard != nil {
		if err := writeYAML(filepath.Join(o.out, "tests", "scorecard", "config.yaml"), scorecard.Object); err != nil {
			return err
		}
	}
	annotations := bundleAnnotations(o, scorecard != nil)
	if err := writeYAML(filepath.Join(o.out, "metadata", "annotations.yaml"), map[string]any{"annotations": annotations}); err != nil {
		return err
	}
	return writeDockerfile(filepath.Join(filepath.Dir(filepath.Clean(o.out)), "bundle.Dockerfile"), filepath.Base(o.out), annotations)
}

// bundleAnnotations are the registry+v1 bundle annotations, also the image's labels.
func bundleAnnotations(o options, scorecard bool) map[string]string {
	a := map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         o.pkg,
		"operators.operatorframework.io.bundle.channels.v1":        o.channels,
		"operators.operatorframework.io.bundle.channel.default.v1": o.defaultChannel,
	}
	if scorecard {
		a["operators.operatorframework.io.test.mediatype.v1"] = "scorecard+v1"
		a["operators.operatorframework.io.test.config.v1"] = "tests/scorecard/"
	}
	return a
}

func writeYAML(path string, obj any) error {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func writeDockerfile(path, dir string, annotations map[string]string) error {
	var b bytes.Buffer
	b.WriteString("# The bundle image (make bundle); build it with docker build -f bundle.Dockerfile .\nFROM scratch\n\n")
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "LABEL %s=%s\n", k, annotations[k])
	}
	fmt.Fprintf(&b, "\nCOPY %[1]s/manifests /manifests/\nCOPY %[1]s/metadata /metadata/\n", dir)
	if _, ok := annotations["operators.operatorframework.io.test.config.v1"]; ok {
		fmt.Fprintf(&b, "COPY %s/tests/scorecard /tests/scorecard/\n", dir)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// validate runs the validators `operator-sdk bundle validate` runs by default, plus the
// optional object and good-practice ones, and checks the bundle's annotations. Errors fail;
// warnings are printed.
func validate(dir string) error {
	bundle, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		return fmt.Errorf("loading %s: %w", dir, err)
	}
	if bundle.CSV == nil || len(bundle.V1CRDs) == 0 {
		return fmt.Errorf("%s: no ClusterServiceVersion or no CRDs", dir)
	}
	validators := validation.DefaultBundleValidators.WithValidators(validation.ObjectValidator, validation.GoodPracticesValidator)
	errCount := 0
	for _, result := range validators.Validate(bundle.ObjectsToValidate()...) {
		for _, e := range result.Errors {
			fmt.Fprintln(os.Stderr, "ERROR:", e.Error())
			errCount++
		}
		for _, w := range result.Warnings {
			fmt.Fprintln(os.Stderr, "WARNING:", w.Error())
		}
	}
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(data, &meta); err != nil {
		return fmt.Errorf("metadata/annotations.yaml: %w", err)
	}
	for _, k := range []string{"mediatype", "manifests", "metadata", "package", "channels", "channel.default"} {
		if meta.Annotations["operators.operatorframework.io.bundle."+k+".v1"] == "" {
			fmt.Fprintf(os.Stderr, "ERROR: metadata/annotations.yaml lacks operators.operatorframework.io.bundle.%s.v1\n", k)
			errCount++
		}
	}
	if p := meta.Annotations["operators.operatorframework.io.bundle.package.v1"]; p != bundle.Package && bundle.Package != "" {
		fmt.Fprintf(os.Stderr, "ERROR: package %q in the annotations, %q in the bundle\n", p, bundle.Package)
		errCount++
	}
	if errCount > 0 {
		return fmt.Errorf("%s: %d validation errors", dir, errCount)
	}
	fmt.Printf("bundle %s (%s) is valid: %d CRDs, %d other objects\n", dir, bundle.CSV.Name, len(bundle.V1CRDs), len(bundle.Objects))
	return nil
}
