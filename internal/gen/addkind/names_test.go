package addkind

import "testing"

func TestPlural(t *testing.T) {
	for kind, want := range map[string]string{
		"Memcached": "memcacheds", "WarpdrivePool": "warpdrivepools", "Policy": "policies",
		"Gateway": "gateways", "Ingress": "ingresses", "Box": "boxes", "Buzz": "buzzes",
		"Batch": "batches", "Mesh": "meshes", "Key": "keys", "WebInfo": "webinfos", "Y": "ys",
	} {
		if got := Plural(kind); got != want {
			t.Errorf("Plural(%s) = %s, want %s", kind, got, want)
		}
	}
}

func TestCheckGVK(t *testing.T) {
	if err := checkGVK("WebApp", "apps.example.com", "v1alpha1"); err != nil {
		t.Errorf("a valid kind refused: %v", err)
	}
	for _, tc := range [][3]string{
		{"webApp", "apps.example.com", "v1"},    // not capitalised
		{"Web-App", "apps.example.com", "v1"},   // not a name
		{"", "apps.example.com", "v1"},          // empty
		{"WebApp", "example", "v1"},             // no dot
		{"WebApp", "Apps.example.com", "v1"},    // not a DNS subdomain
		{"WebApp", "apps.example.com", "1"},     // no v
		{"WebApp", "apps.example.com", "v1rc1"}, // not alpha or beta
		{"WebApp", "apps.example.com", "v0"},    // no version 0
	} {
		if err := checkGVK(tc[0], tc[1], tc[2]); err == nil {
			t.Errorf("%v accepted", tc)
		}
	}
}
