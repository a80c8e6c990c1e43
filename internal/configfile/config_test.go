package configfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// options stand for a controller's: one flag of each kind the manager has.
type options struct {
	workers  int
	delay    time.Duration
	fraction float64
	image    string
	secure   bool
	verbs    []string
	profiles map[string]string
}

func newSchema() (*Schema, *options, *pflag.FlagSet) {
	o := &options{workers: 4, delay: 5 * time.Second, fraction: 0.5, image: "nginx", verbs: []string{"bind"}, profiles: map[string]string{"aws": "aws"}}
	all := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	jwks := pflag.NewFlagSet("jwks", pflag.ContinueOnError)
	jwks.IntVar(&o.workers, "jwks-workers", o.workers, "Workers.")
	jwks.DurationVar(&o.delay, "jwks-retry-base-delay", o.delay, "Delay.")
	jwks.Float64Var(&o.fraction, "jwks-fraction", o.fraction, "Fraction.")
	jwks.StringVar(&o.image, "jwks-nginx-image", o.image, "Image.")
	jwks.StringSliceVar(&o.verbs, "jwks-verbs", o.verbs, "Verbs.")
	jwks.StringVar(new(string), "jwks-removed", "", "Removed.")
	_ = jwks.MarkHidden("jwks-removed")
	top := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	top.BoolVar(&o.secure, "metrics-secure", false, "Secure.")
	top.StringToStringVar(&o.profiles, "shoot-cloud-profiles", o.profiles, "Profiles.")
	all.AddFlagSet(jwks)
	all.AddFlagSet(top)
	return &Schema{Kind: "ManagerConfiguration", Sections: []Section{
		{Name: "manager", Flags: top},
		{Name: "jwks", Prefix: "jwks-", Flags: jwks},
	}}, o, all
}

func write(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const header = "apiVersion: config.trustplane.io/v1alpha1\nkind: ManagerConfiguration\n"

// Every kind of field is set through its flag's parser; lists and mappings replace the
// defaults; a flag on the command line wins over the file.
func TestLoadSetsEveryKindOfField(t *testing.T) {
	s, o, fs := newSchema()
	if err := fs.Parse([]string{"--jwks-workers=9"}); err != nil {
		t.Fatal(err)
	}
	path := write(t, header+`
manager:
  metricsSecure: true
  shootCloudProfiles: {gcp: "gcp-eu", openstack: "a,b"}
jwks:
  workers: 2
  retryBaseDelay: 1m30s
  fraction: 0.75
  nginxImage: nginx:1.29
  verbs: [escalate, impersonate]
`)
	if err := s.Load(path, fs.Changed); err != nil {
		t.Fatal(err)
	}
	if o.workers != 9 {
		t.Errorf("workers %d: the command line's 9 must win over the file's 2", o.workers)
	}
	if o.delay != 90*time.Second || o.fraction != 0.75 || o.image != "nginx:1.29" || !o.secure {
		t.Errorf("got %+v", o)
	}
	if strings.Join(o.verbs, ",") != "escalate,impersonate" {
		t.Errorf("verbs %v: the list must replace the default", o.verbs)
	}
	if len(o.profiles) != 2 || o.profiles["gcp"] != "gcp-eu" || o.profiles["openstack"] != "a,b" {
		t.Errorf("profiles %v: the mapping must replace the default, commas and all", o.profiles)
	}
	if got := s.Effective()["jwks.retryBaseDelay"]; got != "1m30s" {
		t.Errorf("effective jwks.retryBaseDelay %q", got)
	}
}

// Bad input stops the load with one line that names the field (and an example of a good
// value where the value is the problem).
func TestLoadRefusesBadInputNamingTheField(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"unknown field":              {"jwks:\n  wrokers: 2\n", "jwks.wrokers: unknown field"},
		"field in the wrong section": {"manager:\n  nginxImage: x\n", "manager.nginxImage: unknown field (did you mean jwks.nginxImage?)"},
		"unknown section":            {"jwk:\n  workers: 2\n", "jwk: unknown field"},
		"hidden flag":                {"jwks:\n  removed: x\n", "jwks.removed: unknown field"},
		"wrong type":                 {"jwks:\n  workers: \"2\"\n", `jwks.workers: must be a number (for example jwks.workers: 4)`},
		"not an integer":             {"jwks:\n  workers: 2.5\n", "jwks.workers:"},
		"bad duration":               {"jwks:\n  retryBaseDelay: 5 minutes\n", `jwks.retryBaseDelay: time: unknown unit " minutes" in duration "5 minutes" (for example jwks.retryBaseDelay: "30s")`},
		"duration as number":         {"jwks:\n  retryBaseDelay: 5\n", "jwks.retryBaseDelay: must be a string"},
		"list of numbers":            {"jwks:\n  verbs: [1]\n", "jwks.verbs: must be a list of strings"},
		"empty mapping":              {"manager:\n  shootCloudProfiles: {}\n", "manager.shootCloudProfiles: must have at least one entry"},
		"section not a map":          {"jwks: 3\n", "jwks: must be a mapping of its fields"},
		"duplicate key":              {"jwks:\n  workers: 1\n  workers: 2\n", "duplicate"},
	} {
		t.Run(name, func(t *testing.T) {
			s, o, fs := newSchema()
			err := s.Load(write(t, header+tc.body), fs.Changed)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line with %q", err, tc.want)
			}
			if o.workers != 4 {
				t.Errorf("workers %d after a refused file", o.workers)
			}
		})
	}
}

// A file of another kind or version is refused whole.
func TestLoadChecksTheHeader(t *testing.T) {
	for _, body := range []string{
		"apiVersion: config.trustplane.io/v1beta1\nkind: ManagerConfiguration\n",
		"apiVersion: config.trustplane.io/v1alpha1\nkind: NodeAgentConfiguration\n",
		"jwks:\n  workers: 2\n",
	} {
		s, _, fs := newSchema()
		if err := s.Load(write(t, body), fs.Changed); err == nil || !strings.Contains(err.Error(), "want apiVersion: config.trustplane.io/v1alpha1, kind: ManagerConfiguration") {
			t.Errorf("%q: %v", body, err)
		}
	}
}

// The JSON Schema has every field, typed, and refuses others; the reference lists every
// field with its flag.
func TestSchemaAndReferenceCoverEveryField(t *testing.T) {
	s, _, _ := newSchema()
	js := s.JSONSchema()
	props := js["properties"].(map[string]any)
	jwks := props["jwks"].(map[string]any)
	if jwks["additionalProperties"] != false || js["additionalProperties"] != false {
		t.Error("unknown fields must be refused")
	}
	fields := jwks["properties"].(map[string]any)
	for name, typ := range map[string]string{"workers": "integer", "retryBaseDelay": "string", "fraction": "number", "verbs": "array"} {
		if f, ok := fields[name].(map[string]any); !ok || f["type"] != typ {
			t.Errorf("jwks.%s: %v, want type %s", name, fields[name], typ)
		}
	}
	if _, ok := fields["removed"]; ok {
		t.Error("a hidden flag has a field")
	}
	var b strings.Builder
	WriteReference(&b, s)
	for _, path := range s.Paths() {
		if !strings.Contains(b.String(), "`"+path+"`") {
			t.Errorf("the reference lacks %s", path)
		}
	}
}

// landscape stands for a section read whole from the file.
type landscape struct {
	Regions map[string]window `json:"regions" doc:"Window per region."`
	Domain  string            `json:"domain" doc:"The domain."`
}

type window struct {
	Begin string `json:"begin"`
}

func (l *landscape) Validate() error {
	if l.Domain == "bad" {
		return errors.New("domain: must not be bad")
	}
	return nil
}

// A section decoded whole: set from the file, unknown fields and its own Validate refused
// with the path, in the reference and the JSON Schema.
func TestObjectSection(t *testing.T) {
	newObjectSchema := func() (*Schema, *landscape) {
		l := &landscape{Domain: "default.example"}
		s, _, _ := newSchema()
		s.Sections = append(s.Sections, Section{Name: "landscape", Doc: "The landscape.", Object: l})
		return s, l
	}
	s, l := newObjectSchema()
	if err := s.Load(write(t, header+"landscape:\n  domain: kyma.example\n  regions:\n    eu-de-1: {begin: 030000+0000}\n"), func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if l.Domain != "kyma.example" || l.Regions["eu-de-1"].Begin != "030000+0000" {
		t.Errorf("got %+v", l)
	}
	if got := s.Effective()["landscape"]; !strings.Contains(got, `"domain":"kyma.example"`) {
		t.Errorf("effective landscape %s", got)
	}
	for body, want := range map[string]string{
		"landscape:\n  domian: x\n":              `landscape: unknown field "domian"`,
		"landscape:\n  regions: {a: {end: x}}\n": `landscape: unknown field "end"`,
		"landscape:\n  domain: bad\n":            "landscape: domain: must not be bad",
		"landscape:\n  domain: [x]\n":            "landscape: cannot unmarshal array",
	} {
		s, l := newObjectSchema()
		err := s.Load(write(t, header+body), func(string) bool { return false })
		if err == nil || !strings.Contains(err.Error(), want) || l.Domain != "default.example" {
			t.Errorf("%q: %v (domain %q), want %q and nothing set", body, err, l.Domain, want)
		}
	}
	var b strings.Builder
	WriteReference(&b, s)
	if !strings.Contains(b.String(), "| `landscape.regions[*].begin` | string |") || !strings.Contains(b.String(), "Window per region.") {
		t.Errorf("reference:\n%s", b.String())
	}
	js := s.JSONSchema()["properties"].(map[string]any)["landscape"].(map[string]any)
	if js["additionalProperties"] != false {
		t.Errorf("landscape schema %v", js)
	}
}
