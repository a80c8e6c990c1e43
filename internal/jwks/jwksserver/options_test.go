package jwksserver

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		flag   string // "": valid
		change func(*Options)
	}{
		{"", func(*Options) {}},
		{"", func(o *Options) { o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "127.0.0.1:0" }},
		{"--metrics-bind-address", func(o *Options) { o.MetricsBindAddress = "8080" }},
		{"--health-probe-bind-address", func(o *Options) { o.HealthProbeBindAddress = ":notaport" }},
		{"--graceful-shutdown-timeout", func(o *Options) { o.GracefulShutdownTimeout = 0 }},
		{"--graceful-shutdown-timeout", func(o *Options) { o.GracefulShutdownTimeout = -time.Second }},
	} {
		o := DefaultOptions()
		tc.change(&o)
		err := o.Validate()
		switch {
		case tc.flag == "" && err != nil:
			t.Errorf("valid options refused: %v", err)
		case tc.flag != "" && (err == nil || !strings.Contains(err.Error(), tc.flag)):
			t.Errorf("want an error naming %s, got %v", tc.flag, err)
		}
	}
}
