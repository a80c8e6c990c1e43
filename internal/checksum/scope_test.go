package checksum

import "testing"

func TestScopeRoundTrips(t *testing.T) {
	for _, s := range []Scope{
		NewScope(nil, DefaultVersionAnnotation),
		NewScope([]string{"web", "api", "web"}, "fs.ingress.alibaba/version"),
		NewScope([]string{"one"}, DefaultVersionAnnotation),
	} {
		got, err := ParseScope(s.String())
		if err != nil || !got.Equal(s) {
			t.Errorf("ParseScope(%q) = %v, %v", s.String(), got, err)
		}
	}
	if s := NewScope([]string{"web", "api", "web"}, "v"); s.String() != "namespaces=api,web; version-annotation=v" {
		t.Errorf("String() = %q", s.String())
	}
}

func TestScopeOfOlderObjects(t *testing.T) {
	// What trustplane recorded before the label selector went.
	got, err := ParseScope("namespaces=web; selector=; version-annotation=nginx.ingress.kubernetes.io/version")
	if err != nil || !got.Equal(NewScope([]string{"web"}, DefaultVersionAnnotation)) {
		t.Errorf("old scope: %v, %v", got, err)
	}
	for _, bad := range []string{
		"namespaces=*; selector=team=a; version-annotation=v",
		"namespaces=*",
		"namespaces=*; colour=blue; version-annotation=v",
		"garbage",
	} {
		if _, err := ParseScope(bad); err == nil {
			t.Errorf("ParseScope(%q) succeeded", bad)
		}
	}
}

func TestScopeCovers(t *testing.T) {
	all, some := NewScope(nil, "v"), NewScope([]string{"b", "a"}, "v")
	if !all.Covers("x") || !some.Covers("a") || !some.Covers("b") || some.Covers("c") {
		t.Errorf("Covers: all=%v some=%v", all, some)
	}
}
