package rollout

import (
	"reflect"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Policy
	}{
		{"all", Policy{AllAtOnce: true}},
		{"waved", Waved},
		{"canaries:2,waves:20/100,timeout:5m,onfailure:hold",
			Policy{Canaries: 2, Waves: []int{20, 100}, Timeout: 5 * time.Minute, MinReady: Waved.MinReady}},
		{"canary:0,minready:0s", Policy{Waves: Waved.Waves, Timeout: Waved.Timeout, Rollback: true}},
	} {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v, want %+v", tc.in, got, tc.want)
		}
		if again, err := Parse(got.String()); err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%q: String %q reads back as %+v, %v", tc.in, got.String(), again, err)
		}
	}
	for _, bad := range []string{"canaries", "canaries:-1", "waves:50/25/100", "waves:10/50", "waves:0/100",
		"timeout:0s", "timeout:soon", "onfailure:pray", "colour:blue"} {
		if p, err := Parse(bad); err == nil {
			t.Errorf("%q read as %+v", bad, p)
		}
	}
}

func TestPolicies(t *testing.T) {
	ps := Policies{}
	if err := ps.Set("Memcached=canaries:3,waves:50/100"); err != nil {
		t.Fatal(err)
	}
	if p := ps.For("Memcached"); p.Canaries != 3 || !reflect.DeepEqual(p.Waves, []int{50, 100}) {
		t.Errorf("Memcached: %+v", p)
	}
	if p := ps.For("Guestbook"); !reflect.DeepEqual(p, Waved) {
		t.Errorf("a kind not named: %+v, want waved", p)
	}
	if err := ps.Set("*=all"); err != nil {
		t.Fatal(err)
	}
	if p := ps.For("Guestbook"); !p.AllAtOnce {
		t.Errorf("a kind not named, with *=all: %+v", p)
	}
	for _, bad := range []string{"Memcached", "=all", "Memcached=sometimes"} {
		if err := ps.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
