package conversion

import (
	"testing"
)

// typicalCR is a redis CR as a tenant writes it: a few dozen values, a third of them nested,
// of which the chain moves three, and a status.
func typicalCR() map[string]any {
	return map[string]any{
		"apiVersion": "cache.example.com/v1alpha1",
		"kind":       "Redis",
		"metadata": map[string]any{
			"name": "cache", "namespace": "tenant-a", "uid": "6c1a3b0e-8c9f-4b9a-9d57-1d2f0c3b4a5e",
			"resourceVersion": "123456", "generation": int64(4), "creationTimestamp": "2025-01-01T00:00:00Z",
			"labels":      map[string]any{"app.kubernetes.io/name": "redis", "team": "a"},
			"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{"replicaCount":3}}`},
		},
		"spec": map[string]any{
			"replicaCount": int64(3),
			"password":     "s3cret",
			"image":        map[string]any{"registry": "docker.io", "repository": "bitnami/redis", "tag": "7.2.4", "pullPolicy": "IfNotPresent"},
			"architecture": "replication",
			"master": map[string]any{
				"count":       int64(1),
				"resources":   map[string]any{"limits": map[string]any{"cpu": "500m", "memory": "512Mi"}, "requests": map[string]any{"cpu": "100m", "memory": "128Mi"}},
				"persistence": map[string]any{"enabled": true, "size": "8Gi", "accessModes": []any{"ReadWriteOnce"}},
				"service":     map[string]any{"type": "ClusterIP", "ports": map[string]any{"redis": int64(6379)}},
			},
			"replica": map[string]any{
				"replicaCount": int64(2),
				"persistence":  map[string]any{"enabled": true, "size": "8Gi"},
				"tolerations":  []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "cache", "effect": "NoSchedule"}},
			},
			"metrics":    map[string]any{"enabled": false, "serviceMonitor": map[string]any{"enabled": false, "interval": "30s"}},
			"legacyPort": int64(6380),
		},
		"status": map[string]any{
			"conditions":      []any{map[string]any{"type": "Deployed", "status": "True", "reason": "InstallSuccessful"}},
			"deployedRelease": map[string]any{"name": "cache", "manifest": "..."},
		},
	}
}

// BenchmarkConvert converts a typical CR to the newer version (two moves and a drop, kept in
// the annotation), and the result back.
func BenchmarkConvert(b *testing.B) {
	c := mustParse(b, redisSteps)
	obj := typicalCR()
	v1, err := c.ConvertMap(obj, "v1")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("up", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.ConvertMap(obj, "v1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("down", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.ConvertMap(v1, "v1alpha1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
