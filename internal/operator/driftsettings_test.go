package operator

import (
	"reflect"
	"testing"
)

func TestParseDriftSetting(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want DriftSetting
	}{
		{"repair", DriftSetting{Mode: DriftRepair}},
		{"report", DriftSetting{Mode: DriftReport}},
		{"off", DriftSetting{Mode: DriftOff}},
		{"repair;ignore=Deployment:/spec/replicas", DriftSetting{Mode: DriftRepair,
			Ignore: []DriftIgnore{{"Deployment", "/spec/replicas"}}}},
		{"report;ignore=Deployment:/spec/replicas,*:/metadata/annotations/a.b~1c", DriftSetting{Mode: DriftReport,
			Ignore: []DriftIgnore{{"Deployment", "/spec/replicas"}, {"*", "/metadata/annotations/a.b~1c"}}}},
	} {
		got, err := ParseDriftSetting(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseDriftSetting(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if again, err := ParseDriftSetting(got.String()); err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%q: String() %q reads back as %+v, %v", tc.in, got.String(), again, err)
		}
	}
	for _, bad := range []string{"", "fix", "repair;ignore=Deployment", "repair;ignore=:/spec", "repair;ignore=Deployment:spec/replicas",
		"repair;ignore=Deployment:/", "repair;ignore=Deployment:/metadata/name", "repair;ignore=Deployment:/kind",
		"repair;skip=Deployment:/spec", "off;ignore=Deployment:/spec/replicas"} {
		if got, err := ParseDriftSetting(bad); err == nil {
			t.Errorf("ParseDriftSetting(%q) = %+v, want an error", bad, got)
		}
	}

	ds := DriftSettings{}
	for _, f := range []string{"Memcached=report", "*=repair;ignore=ConfigMap:/data/x"} {
		if err := ds.Set(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := ds.Set("report"); err == nil {
		t.Error("Set(report) without a kind: no error")
	}
	if got := ds.For("Memcached").Mode; got != DriftReport {
		t.Errorf("Memcached: %s, want report", got)
	}
	if got := ds.For("Guestbook"); got.Mode != DriftRepair || len(got.Ignore) != 1 {
		t.Errorf("Guestbook: %+v, want *'s", got)
	}
	if got := (DriftSettings{}).For("Guestbook"); got.Mode != DriftRepair || got.Ignore != nil {
		t.Errorf("no flag: %+v, want repair, nothing ignored", got)
	}
}
