package charts

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
)

// The objects each chart renders for its sample, by release name and spec.
var sampleObjects = map[string]func(release string, spec map[string]any) []string{
	"WarpdrivePool": func(release string, spec map[string]any) []string {
		return withBudget(spec, release, "ConfigMap/"+release, "Service/"+release, "StatefulSet/"+release, "StorageClass/"+namespace+"."+release)
	},
	"AppService": func(release string, spec map[string]any) []string {
		return withBudget(spec, release, "Deployment/"+spec["deploymentName"].(string), "Service/"+release)
	},
	"UnitedDeployment": func(release string, spec map[string]any) []string {
		return withBudget(spec, release, "Deployment/"+spec["deploymentName"].(string))
	},
	"Guestbook": func(release string, spec map[string]any) []string {
		return withBudget(spec, release, "Deployment/"+release, "Service/"+release)
	},
	"Memcached": func(release string, _ map[string]any) []string {
		return []string{"Deployment/" + release, "PodDisruptionBudget/" + release}
	},
}

// withBudget is keys, sorted, with the release's PodDisruptionBudget when the spec asks for
// more than one replica: a chart renders one only then.
func withBudget(spec map[string]any, release string, keys ...string) []string {
	if n, _ := spec["replicas"].(int64); n > 1 {
		keys = append(keys, "PodDisruptionBudget/"+release)
	}
	slices.Sort(keys)
	return keys
}

// Every watched kind has a chart and a sample, which renders; a house chart renders exactly
// the expected objects for it and follows checkCommon, any other chart checkAnyChart.
func TestSamplesRender(t *testing.T) {
	for _, w := range watchList(t) {
		t.Run(w.Kind, func(t *testing.T) {
			s := loadSample(t, w)
			if s.Object["kind"] != w.Kind || s.Object["apiVersion"] != w.Group+"/"+w.Version {
				t.Errorf("sample is a %v %v", s.Object["apiVersion"], s.Object["kind"])
			}
			chartName := strings.ToLower(w.Kind)
			if w.Chart != "helm-charts/"+chartName {
				t.Errorf("chart path %q, want helm-charts/%s", w.Chart, chartName)
			}
			r := mustInstall(t, chartName, s.Name, s.Values)
			if !isHouseChart(chartName) {
				checkAnyChart(t, r)
				return
			}
			want, ok := sampleObjects[w.Kind]
			if !ok {
				t.Fatalf("no expectations for kind %s: add them to sampleObjects", w.Kind)
			}
			if got := r.keys(); !reflect.DeepEqual(got, want(s.Name, s.Spec)) {
				t.Errorf("objects %v, want %v", got, want(s.Name, s.Spec))
			}
			checkCommon(t, r, chartName, s.Name)
		})
	}
}

// The original controllers' custom resources keep working: the spec shapes they used are
// accepted as they are.
func TestOriginalSpecShapes(t *testing.T) {
	tests := []struct {
		chart, spec, replicasOf string
		replicas                int32
	}{
		{"appservice", "deploymentName: x\nreplicas: 1", "Deployment/x", 1},
		{"uniteddeployment", "deploymentName: x\nreplicas: 3", "Deployment/x", 3},
		{"memcached", "size: 3", "Deployment/r", 3},
		{"guestbook", "foo: bar", "Deployment/r", 1},
		{"warpdrivepool", "capacity: 10Gi", "StatefulSet/r", 1},
	}
	for _, tt := range tests {
		t.Run(tt.chart, func(t *testing.T) {
			r := mustInstall(t, tt.chart, "r", decodeYAML(t, tt.spec))
			checkCommon(t, r, tt.chart, "r")
			var got *int32
			switch o := r.objects[tt.replicasOf].(type) {
			case *appsv1.Deployment:
				got = o.Spec.Replicas
			case *appsv1.StatefulSet:
				got = o.Spec.Replicas
			default:
				t.Fatalf("no %s among %v", tt.replicasOf, r.keys())
			}
			if got == nil || *got != tt.replicas {
				t.Errorf("replicas %v, want %d", got, tt.replicas)
			}
		})
	}
}

func TestWarpdrivePool(t *testing.T) {
	const release = "pool-a"
	r := mustInstall(t, "warpdrivepool", release, decodeYAML(t, `
capacity: 100Gi
replicas: 3
overcommitRatio: 1.5
reclaimPolicy: Retain
storageClassName: fast-pool
image: registry.example.com/pool:2.0
nodeSelector: {disktype: ssd}
resources: {limits: {memory: 1Gi}}
`))
	checkCommon(t, r, "warpdrivepool", release)
	if got, want := r.keys(), []string{"ConfigMap/pool-a", "PodDisruptionBudget/pool-a", "Service/pool-a", "StatefulSet/pool-a", "StorageClass/fast-pool"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}

	sts := get[*appsv1.StatefulSet](t, r, "StatefulSet/pool-a")
	if *sts.Spec.Replicas != 3 || sts.Spec.ServiceName != "pool-a" || sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("statefulset: replicas %d, serviceName %q, policy %q", *sts.Spec.Replicas, sts.Spec.ServiceName, sts.Spec.PodManagementPolicy)
	}
	pod := sts.Spec.Template.Spec
	if !reflect.DeepEqual(pod.NodeSelector, map[string]string{"disktype": "ssd"}) {
		t.Errorf("nodeSelector %v", pod.NodeSelector)
	}
	c := pod.Containers[0]
	if c.Image != "registry.example.com/pool:2.0" || c.EnvFrom[0].ConfigMapRef.Name != "pool-a" {
		t.Errorf("container: image %q, envFrom %+v", c.Image, c.EnvFrom)
	}
	// A limit from the spec replaces its default; the other defaults are kept.
	wantRes := corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("256Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("64Mi")},
	}
	if !equalResources(c.Resources, wantRes) {
		t.Errorf("resources %v, want %v", c.Resources, wantRes)
	}
	if !reflect.DeepEqual(sts.Spec.Selector.MatchLabels, map[string]string{
		"app.kubernetes.io/name": "warpdrivepool", "app.kubernetes.io/instance": release}) {
		t.Errorf("selector %v", sts.Spec.Selector.MatchLabels)
	}

	svc := get[*corev1.Service](t, r, "Service/pool-a")
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !reflect.DeepEqual(svc.Spec.Selector, sts.Spec.Selector.MatchLabels) {
		t.Errorf("service: clusterIP %q, selector %v", svc.Spec.ClusterIP, svc.Spec.Selector)
	}

	cm := get[*corev1.ConfigMap](t, r, "ConfigMap/pool-a")
	wantData := map[string]string{
		"POOL_NAME": release, "POOL_CAPACITY": "100Gi", "POOL_OVERCOMMIT_RATIO": "1.5",
		"POOL_RECLAIM_POLICY": "Retain", "POOL_STORAGE_CLASS": "fast-pool",
	}
	if !reflect.DeepEqual(cm.Data, wantData) {
		t.Errorf("configmap data %v, want %v", cm.Data, wantData)
	}

	sc := get[*storagev1.StorageClass](t, r, "StorageClass/fast-pool")
	wantParams := map[string]string{"pool": release, "poolNamespace": namespace, "poolService": "pool-a.team-a.svc"}
	if sc.Provisioner != "warpdrive.transwarp.io/pool" || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimRetain ||
		*sc.VolumeBindingMode != storagev1.VolumeBindingImmediate || !reflect.DeepEqual(sc.Parameters, wantParams) {
		t.Errorf("storageclass: provisioner %q, reclaimPolicy %v, binding %v, parameters %v",
			sc.Provisioner, *sc.ReclaimPolicy, *sc.VolumeBindingMode, sc.Parameters)
	}
}

func TestWarpdrivePoolDefaultsAndBounds(t *testing.T) {
	r := mustInstall(t, "warpdrivepool", "pool-b", map[string]any{"capacity": int64(1099511627776)})
	checkCommon(t, r, "warpdrivepool", "pool-b")
	// Without storageClassName, and no class of chart 0.1.0 to keep (lookup finds none here).
	sc := get[*storagev1.StorageClass](t, r, "StorageClass/"+namespace+".pool-b")
	if *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("default reclaimPolicy %v", *sc.ReclaimPolicy)
	}
	cm := get[*corev1.ConfigMap](t, r, "ConfigMap/pool-b")
	if cm.Data["POOL_CAPACITY"] != "1099511627776" || cm.Data["POOL_OVERCOMMIT_RATIO"] != "1" {
		t.Errorf("configmap data %v", cm.Data)
	}
	if img := get[*appsv1.StatefulSet](t, r, "StatefulSet/pool-b").Spec.Template.Spec.Containers[0].Image; img != "warpdrive/pool-server:0.1.0" {
		t.Errorf("default image %q", img)
	}

	// Scaling the pool changes only the StatefulSet's replicas: the pod template (with its
	// config checksum) stays the same, so no server restarts.
	var template *corev1.PodTemplateSpec
	for _, replicas := range []int64{1, 32} {
		r := mustInstall(t, "warpdrivepool", "pool-b", map[string]any{"capacity": "1Ti", "replicas": replicas})
		sts := get[*appsv1.StatefulSet](t, r, "StatefulSet/pool-b")
		if int64(*sts.Spec.Replicas) != replicas {
			t.Errorf("replicas %d rendered as %d", replicas, *sts.Spec.Replicas)
		}
		if template != nil && !reflect.DeepEqual(template, &sts.Spec.Template) {
			t.Errorf("scaling to %d changed the pod template", replicas)
		}
		template = &sts.Spec.Template
	}
	// A change of the servers' settings does change the pod template, to restart them.
	r = mustInstall(t, "warpdrivepool", "pool-b", map[string]any{"capacity": "2Ti", "replicas": int64(32)})
	if sts := get[*appsv1.StatefulSet](t, r, "StatefulSet/pool-b"); sts.Spec.Template.Annotations["checksum/config"] == template.Annotations["checksum/config"] {
		t.Error("a new capacity left the config checksum of the pod template unchanged")
	}
	for _, capacity := range []any{"1", int64(1), "0.5Gi", "1e3", "+2Pi"} {
		mustInstall(t, "warpdrivepool", "pool-b", map[string]any{"capacity": capacity})
	}
}

// A capacity of zero matches the schema but is refused by the chart's own check, with a
// message the operator shows in the ReleaseFailed condition.
func TestWarpdrivePoolZeroCapacityFails(t *testing.T) {
	for _, capacity := range []any{int64(0), "0", "0Gi", "0.0Ti", "000", ".0", "0e3", "+0Mi"} {
		_, err := install(t, "warpdrivepool", "pool-c", map[string]any{"capacity": capacity})
		if err == nil || !strings.Contains(err.Error(), "capacity must be greater than zero") {
			t.Errorf("capacity %v: error %v, want \"capacity must be greater than zero\"", capacity, err)
		}
	}
}

func TestAppServiceAndUnitedDeployment(t *testing.T) {
	for _, chartName := range []string{"appservice", "uniteddeployment"} {
		t.Run(chartName, func(t *testing.T) {
			for _, replicas := range []int64{0, 1, 100} {
				r := mustInstall(t, chartName, "svc-a", map[string]any{"deploymentName": "web", "replicas": replicas})
				checkCommon(t, r, chartName, "svc-a")
				d := get[*appsv1.Deployment](t, r, "Deployment/web")
				if int64(*d.Spec.Replicas) != replicas {
					t.Errorf("replicas %d rendered as %d", replicas, *d.Spec.Replicas)
				}
				if chartName == "appservice" {
					svc := get[*corev1.Service](t, r, "Service/svc-a")
					if !reflect.DeepEqual(svc.Spec.Selector, d.Spec.Selector.MatchLabels) || svc.Spec.Ports[0].TargetPort != intstr.FromString("http") {
						t.Errorf("service selector %v, ports %v; deployment selector %v", svc.Spec.Selector, svc.Spec.Ports, d.Spec.Selector.MatchLabels)
					}
				}
			}
			// A 63-character deploymentName, the longest label, is the Deployment's name.
			long := strings.Repeat("d", 63)
			r := mustInstall(t, chartName, "svc-a", map[string]any{"deploymentName": long})
			if d := get[*appsv1.Deployment](t, r, "Deployment/"+long); *d.Spec.Replicas != 1 {
				t.Errorf("default replicas %d", *d.Spec.Replicas)
			}
		})
	}
}

func TestGuestbook(t *testing.T) {
	for _, serviceType := range []string{"ClusterIP", "NodePort", "LoadBalancer"} {
		r := mustInstall(t, "guestbook", "gb", map[string]any{"replicas": int64(4), "serviceType": serviceType, "image": "gb:1"})
		checkCommon(t, r, "guestbook", "gb")
		d := get[*appsv1.Deployment](t, r, "Deployment/gb")
		svc := get[*corev1.Service](t, r, "Service/gb")
		if *d.Spec.Replicas != 4 || d.Spec.Template.Spec.Containers[0].Image != "gb:1" {
			t.Errorf("deployment: replicas %d, image %q", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
		}
		if string(svc.Spec.Type) != serviceType || !reflect.DeepEqual(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
			t.Errorf("service: type %q, selector %v", svc.Spec.Type, svc.Spec.Selector)
		}
	}
	r := mustInstall(t, "guestbook", "gb", map[string]any{})
	if svc := get[*corev1.Service](t, r, "Service/gb"); svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("default service type %q", svc.Spec.Type)
	}
}

func TestMemcached(t *testing.T) {
	for _, size := range []int64{0, 3, 100} {
		r := mustInstall(t, "memcached", "cache", map[string]any{"size": size})
		checkCommon(t, r, "memcached", "cache")
		d := get[*appsv1.Deployment](t, r, "Deployment/cache")
		if int64(*d.Spec.Replicas) != size {
			t.Errorf("size %d rendered as %d replicas", size, *d.Spec.Replicas)
		}
		pdb := get[*policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget/cache")
		if *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
			t.Errorf("pdb: maxUnavailable %v, selector %v", pdb.Spec.MaxUnavailable, pdb.Spec.Selector)
		}
	}
}

// A Memcached with a password renders memcached's auth file into a Secret of its own, mounts
// it and restarts its pods when it changes; without one, neither the Secret nor the flag.
func TestMemcachedAuth(t *testing.T) {
	r := mustInstall(t, "memcached", "cache", map[string]any{"size": int64(1)})
	if _, ok := r.objects["Secret/cache-auth"]; ok {
		t.Error("a Secret without a password")
	}
	if d := get[*appsv1.Deployment](t, r, "Deployment/cache"); slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--auth-file=/etc/memcached/auth") {
		t.Error("--auth-file without a password")
	}
	checksums := map[string]bool{}
	for _, password := range []string{"s3cret", "other"} {
		r := mustInstall(t, "memcached", "cache", map[string]any{"auth": map[string]any{"username": "app", "password": password}})
		checkCommon(t, r, "memcached", "cache")
		s := get[*corev1.Secret](t, r, "Secret/cache-auth")
		if got := string(s.Data["auth"]); got != "app:"+password+"\n" {
			t.Errorf("auth file %q", got)
		}
		d := get[*appsv1.Deployment](t, r, "Deployment/cache")
		if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--auth-file=/etc/memcached/auth") {
			t.Errorf("args %v", d.Spec.Template.Spec.Containers[0].Args)
		}
		checksums[d.Spec.Template.Annotations["checksum/auth"]] = true
	}
	if len(checksums) != 2 {
		t.Errorf("a new password does not change the pods' template: %v", checksums)
	}
}

// Release names up to Helm's limit of 53 give valid object names and label values; the
// pool's StatefulSet (and its Service and ConfigMap) are cut to 52 characters, which leaves
// room for the revision hash that the StatefulSet controller appends in its pods' labels.
func TestLongReleaseName(t *testing.T) {
	long := strings.Repeat("a", 52) + "z"
	cut := long[:52]
	tests := []struct {
		chart string
		spec  map[string]any
		want  []string
	}{
		{"warpdrivepool", map[string]any{"capacity": "1Gi"},
			[]string{"ConfigMap/" + cut, "Service/" + cut, "StatefulSet/" + cut, "StorageClass/" + namespace + "." + long}},
		{"appservice", map[string]any{"deploymentName": "web"}, []string{"Deployment/web", "Service/" + long}},
		{"uniteddeployment", map[string]any{"deploymentName": "web"}, []string{"Deployment/web"}},
		{"guestbook", map[string]any{}, []string{"Deployment/" + long, "Service/" + long}},
		{"memcached", map[string]any{}, []string{"Deployment/" + long, "PodDisruptionBudget/" + long}},
	}
	for _, tt := range tests {
		t.Run(tt.chart, func(t *testing.T) {
			r := mustInstall(t, tt.chart, long, tt.spec)
			checkCommon(t, r, tt.chart, long)
			if got := r.keys(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("objects %v, want %v", got, tt.want)
			}
			_, err := install(t, tt.chart, long+"b", tt.spec)
			if err == nil || !strings.Contains(err.Error(), "must not be longer than 53") {
				t.Errorf("a 54-character release name: error %v, want Helm to refuse it", err)
			}
		})
	}
}

// Strings that would break YAML or look like templates reach the objects verbatim: values
// are quoted, never evaluated as templates, and cannot add fields or objects.
func TestHostileStrings(t *testing.T) {
	hostile := []string{"a: b\n- c", "{{ .Release.Name }}", "x\"\n---\napiVersion: v1\nkind: Namespace", "'; } ]"}
	specs := map[string]map[string]any{
		"warpdrivepool":    {"capacity": "1Gi"},
		"appservice":       {"deploymentName": "web"},
		"uniteddeployment": {"deploymentName": "web"},
		"guestbook":        {},
		"memcached":        {},
	}
	for chartName, spec := range specs {
		t.Run(chartName, func(t *testing.T) {
			plain := mustInstall(t, chartName, "h", spec)
			for _, s := range hostile {
				values := with(spec, "image", s)
				if chartName == "warpdrivepool" {
					values["nodeSelector"] = map[string]any{"zone": s, s: "v"}
				}
				r := mustInstall(t, chartName, "h", values)
				if !reflect.DeepEqual(r.keys(), plain.keys()) {
					t.Fatalf("image %q: objects %v, want %v", s, r.keys(), plain.keys())
				}
				checkCommon(t, r, chartName, "h")
				for key, obj := range r.objects {
					tmpl := podTemplate(obj)
					if tmpl == nil {
						continue
					}
					if got := tmpl.Spec.Containers[0].Image; got != s {
						t.Errorf("%s: image %q, want %q", key, got, s)
					}
					if chartName == "warpdrivepool" && !reflect.DeepEqual(tmpl.Spec.NodeSelector, map[string]string{"zone": s, s: "v"}) {
						t.Errorf("%s: nodeSelector %v", key, tmpl.Spec.NodeSelector)
					}
				}
			}
		})
	}
}

// values.schema.json rejects bad values before anything renders, naming the field.
func TestSchemaRejects(t *testing.T) {
	pool := map[string]any{"capacity": "10Gi"}
	app := map[string]any{"deploymentName": "web"}
	tests := []struct {
		chart   string
		values  map[string]any
		wantErr string
	}{
		{"warpdrivepool", map[string]any{}, "missing property 'capacity'"},
		{"warpdrivepool", with(pool, "capacity", "-1Gi"), "'/capacity'"},
		{"warpdrivepool", with(pool, "capacity", int64(-1)), "'/capacity'"},
		{"warpdrivepool", with(pool, "capacity", "ten gigs"), "'/capacity'"},
		{"warpdrivepool", with(pool, "capacity", 1.5), "'/capacity'"},
		{"warpdrivepool", with(pool, "capacity", "a: b\n- c"), "'/capacity'"},
		{"warpdrivepool", with(pool, "replicas", int64(0)), "'/replicas'"},
		{"warpdrivepool", with(pool, "replicas", int64(33)), "'/replicas'"},
		{"warpdrivepool", with(pool, "replicas", "3"), "'/replicas'"},
		{"warpdrivepool", with(pool, "overcommitRatio", 0.5), "'/overcommitRatio'"},
		{"warpdrivepool", with(pool, "overcommitRatio", int64(11)), "'/overcommitRatio'"},
		{"warpdrivepool", with(pool, "reclaimPolicy", "Recycle"), "'/reclaimPolicy'"},
		{"warpdrivepool", with(pool, "storageClassName", "Fast_Pool"), "'/storageClassName'"},
		{"warpdrivepool", with(pool, "storageClassName", ""), "'/storageClassName'"},
		{"warpdrivepool", with(pool, "storageClassName", "{{ .Release.Name }}"), "'/storageClassName'"},
		{"warpdrivepool", with(pool, "image", ""), "'/image'"},
		{"warpdrivepool", with(pool, "nodeSelector", map[string]any{"zone": int64(1)}), "'/nodeSelector/zone'"},
		{"warpdrivepool", with(pool, "resources", map[string]any{"requests": map[string]any{"cpu": "lots"}}), "'/resources/requests/cpu'"},
		{"warpdrivepool", with(pool, "resources", map[string]any{"claims": []any{}}), "'/resources'"},
		{"warpdrivepool", with(pool, "namespace", "kube-system"), "additional properties 'namespace' not allowed"},
		{"appservice", map[string]any{"replicas": int64(1)}, "missing property 'deploymentName'"},
		{"appservice", with(app, "deploymentName", "Web_App"), "'/deploymentName'"},
		{"appservice", with(app, "deploymentName", "a: b\n- c"), "'/deploymentName'"},
		{"appservice", with(app, "deploymentName", strings.Repeat("d", 64)), "'/deploymentName'"},
		{"appservice", with(app, "replicas", int64(-1)), "'/replicas'"},
		{"appservice", with(app, "replicas", int64(101)), "'/replicas'"},
		{"uniteddeployment", map[string]any{}, "missing property 'deploymentName'"},
		{"uniteddeployment", with(app, "deploymentName", "web.app"), "'/deploymentName'"},
		{"uniteddeployment", with(app, "replicas", int64(101)), "'/replicas'"},
		{"guestbook", map[string]any{"serviceType": "ExternalName"}, "'/serviceType'"},
		{"guestbook", map[string]any{"replicas": int64(101)}, "'/replicas'"},
		{"guestbook", map[string]any{"foo": int64(1)}, "'/foo'"},
		{"memcached", map[string]any{"size": int64(-1)}, "'/size'"},
		{"memcached", map[string]any{"size": int64(101)}, "'/size'"},
		{"memcached", map[string]any{"size": 2.5}, "'/size'"},
	}
	for _, tt := range tests {
		_, err := install(t, tt.chart, "bad", tt.values)
		if err == nil {
			t.Errorf("%s %v: rendered, want a schema error naming %s", tt.chart, tt.values, tt.wantErr)
			continue
		}
		if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s %v: error %q, want a schema error containing %s", tt.chart, tt.values, err, tt.wantErr)
		}
	}
}

// values.yaml and the spec schemas agree. What the operator needs of every chart: the CRD
// defaults a field only to what values.yaml holds there, so that a CR without the field
// renders as helm install without the value does (crdgen leaves out any other default).
// Without a values.schema.json, crdgen infers the spec from the values files, with a field for
// every key of values.yaml. A house chart's values.schema.json must also give values.yaml's
// value as each top-level default and declare every key. A chart not of this repository, such
// as one added with make add-kind, is held only to what Helm holds it to: Helm never applies a
// schema's defaults and keeps keys a schema does not declare (unless additionalProperties is
// false), and catalogue charts' schemas often disagree with their values.yaml so. Such
// disagreements are logged, with why they are accepted.
func TestValuesMatchSchemaDefaults(t *testing.T) {
	for _, w := range watchList(t) {
		t.Run(w.Kind, func(t *testing.T) {
			chartName := strings.ToLower(w.Kind)
			c := loadChart(t, chartName)
			spec := loadCRD(t, w).v1.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			for _, e := range crdDefaultsNotInValues("", spec, c.Values) {
				t.Errorf("the CRD's spec schema: %s", e)
			}

			if c.Schema == nil {
				for name := range c.Values {
					if _, ok := spec.Properties[name]; !ok {
						t.Errorf("values.yaml has %s, which the spec schema inferred from the values files does not declare", name)
					}
				}
				return
			}
			var schema struct {
				Properties map[string]struct {
					Default any `json:"default"`
				} `json:"properties"`
			}
			if err := yaml.Unmarshal(c.Schema, &schema); err != nil {
				t.Fatal(err)
			}
			house := isHouseChart(chartName)
			for name, prop := range schema.Properties {
				if d := prop.Default; d != nil && !reflect.DeepEqual(d, c.Values[name]) {
					if house {
						t.Errorf("%s: default %v in %s, values.yaml %v", name, d, crdgen.ValuesSchemaFile, c.Values[name])
					} else {
						t.Logf("%s: default %q in %s, values.yaml %q; accepted, as Helm accepts it: Helm never applies a schema's default "+
							"and the CRD does not carry this one, so a CR without %s renders with values.yaml's", name, d, crdgen.ValuesSchemaFile, c.Values[name], name)
					}
				}
			}
			for name := range c.Values {
				if _, ok := schema.Properties[name]; ok {
					continue
				}
				if house {
					t.Errorf("values.yaml has %s, which %s does not declare", name, crdgen.ValuesSchemaFile)
				} else {
					t.Logf("values.yaml has %s, which %s does not declare; accepted, as Helm accepts it: the apiserver keeps it "+
						"in an open part of the CRD, for review", name, crdgen.ValuesSchemaFile)
				}
			}
		})
	}
}

// crdDefaultsNotInValues lists the defaults of a CRD's schema node s, at path, that are not
// what values.yaml holds there (values, the map at path). It looks into the properties of the
// objects values.yaml holds: items and map values have no default in values.yaml.
func crdDefaultsNotInValues(path string, s apiextv1.JSONSchemaProps, values map[string]any) []string {
	var out []string
	for name, prop := range s.Properties {
		at := strings.TrimPrefix(path+"."+name, ".")
		v, present := values[name]
		if prop.Default != nil {
			var d any
			if err := yaml.Unmarshal(prop.Default.Raw, &d); err != nil {
				out = append(out, fmt.Sprintf("%s: default %s: %v", at, prop.Default.Raw, err))
			} else if !present || !reflect.DeepEqual(d, v) {
				out = append(out, fmt.Sprintf("%s: default %s, values.yaml %v", at, prop.Default.Raw, v))
			}
		}
		if m, ok := v.(map[string]any); ok {
			out = append(out, crdDefaultsNotInValues(at, prop, m)...)
		}
	}
	return out
}

// crdDefaultsNotInValues finds a default of the CRD that values.yaml does not hold, at any depth.
func TestCRDDefaultsChecker(t *testing.T) {
	str := func(d string) apiextv1.JSONSchemaProps {
		return apiextv1.JSONSchemaProps{Type: "string", Default: &apiextv1.JSON{Raw: []byte(d)}}
	}
	spec := apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
		"config": str(`""`),
		"mode":   str(`"fast"`),
		"server": {Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
			"preset": str(`"nano"`),
			"port":   {Type: "integer", Default: &apiextv1.JSON{Raw: []byte("6379")}},
		}},
		"extra": str(`"x"`),
	}}
	values := map[string]any{"config": "appendonly yes", "mode": "fast",
		"server": map[string]any{"preset": "micro", "port": float64(6379)}}
	got := crdDefaultsNotInValues("", spec, values)
	slices.Sort(got)
	want := []string{`config: default "", values.yaml appendonly yes`, `extra: default "x", values.yaml <nil>`,
		`server.preset: default "nano", values.yaml micro`}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func equalResources(a, b corev1.ResourceRequirements) bool {
	eq := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || v.Cmp(w) != 0 {
				return false
			}
		}
		return true
	}
	return eq(a.Limits, b.Limits) && eq(a.Requests, b.Requests)
}
