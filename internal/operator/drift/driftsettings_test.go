package drift

import (
	"reflect"
	"testing"
)

func TestParseDriftSetting(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Setting
	}{
		{"repair", Setting{Mode: Repair}},
		{"report", Setting{Mode: Report}},
		{"off", Setting{Mode: Off}},
		{"repair;ignore=Deployment:/spec/replicas", Setting{Mode: Repair,
			Ignore: []Ignore{{"Deployment", "/spec/replicas"}}}},
		{"report;ignore=Deployment:/spec/replicas,*:/metadata/annotations/a.b~1c", Setting{Mode: Report,
			Ignore: []Ignore{{"Deployment", "/spec/replicas"}, {"*", "/metadata/annotations/a.b~1c"}}}},
	} {
		got, err := ParseSetting(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseSetting(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if again, err := ParseSetting(got.String()); err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%q: String() %q reads back as %+v, %v", tc.in, got.String(), again, err)
		}
	}
	for _, bad := range []string{"", "fix", "repair;ignore=Deployment", "repair;ignore=:/spec", "repair;ignore=Deployment:spec/replicas",
		"repair;ignore=Deployment:/", "repair;ignore=Deployment:/metadata/name", "repair;ignore=Deployment:/kind",
		"repair;skip=Deployment:/spec", "off;ignore=Deployment:/spec/replicas"} {
		if got, err := ParseSetting(bad); err == nil {
			t.Errorf("ParseSetting(%q) = %+v, want an error", bad, got)
		}
	}

	ds := Settings{}
	for _, f := range []string{"Memcached=report", "*=repair;ignore=ConfigMap:/data/x"} {
		if err := ds.Set(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := ds.Set("report"); err == nil {
		t.Error("Set(report) without a kind: no error")
	}
	if got := ds.For("Memcached").Mode; got != Report {
		t.Errorf("Memcached: %s, want report", got)
	}
	if got := ds.For("Guestbook"); got.Mode != Repair || len(got.Ignore) != 1 {
		t.Errorf("Guestbook: %+v, want *'s", got)
	}
	if got := (Settings{}).For("Guestbook"); got.Mode != Repair || got.Ignore != nil {
		t.Errorf("no flag: %+v, want repair, nothing ignored", got)
	}
}
