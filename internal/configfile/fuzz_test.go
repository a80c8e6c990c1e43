package configfile

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// FuzzLoad: whatever a configuration file holds, Load either sets fields or refuses the
// file with an error naming --config, and a refused file changes no flag at all.
func FuzzLoad(f *testing.F) {
	f.Add(header + "jwks:\n  workers: 8\n  retryBaseDelay: 2s\n  verbs: [get, list]\nmanager:\n  shootCloudProfiles: {gcp: gcp}\n")
	f.Add(header + "jwks:\n  workers: 8\n  retryBaseDelay: forever\n")
	f.Add(header + "jwks: {workers: 1e99}\n")
	f.Add("kind: Other\n")
	f.Add("{")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content string) {
		s, _, flags := newSchema()
		before := values(flags)
		file, err := os.CreateTemp(dir, "config-*.yaml") // one per input: workers run at once
		if err != nil {
			t.Fatal(err)
		}
		path := file.Name()
		defer os.Remove(path)
		if _, err := file.WriteString(content); err != nil || file.Close() != nil {
			t.Fatal(err)
		}
		err = s.Load(path, func(string) bool { return false })
		if err == nil {
			return
		}
		if !strings.HasPrefix(err.Error(), "--config") {
			t.Fatalf("error %q does not name --config", err)
		}
		if after := values(flags); after != before {
			t.Fatalf("a refused file changed flags:\n%s\n→\n%s", before, after)
		}
	})
}

func values(fs *pflag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *pflag.Flag) { b.WriteString(f.Name + "=" + f.Value.String() + "\n") })
	return b.String()
}
