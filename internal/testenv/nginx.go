package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StartNginx runs Debian's nginx in the foreground, as a child of the test, with httpConf
// (server blocks, as they go into conf.d) inside its http block, until the test ends. The
// process settings around it (pid, logs, temp paths) are the test's own. It fails the test
// when nginx -t refuses the configuration, and returns once nginx listens.
func StartNginx(tb testing.TB, httpConf string) {
	tb.Helper()
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		nginx = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(nginx); err != nil {
		tb.Fatal("nginx is not installed: `make test` installs it (hack/install-test-deps.sh)")
	}
	dir := tb.TempDir()
	pid := filepath.Join(dir, "nginx.pid")
	conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s;
error_log stderr warn;
events {}
http {
    access_log off;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    include /etc/nginx/mime.types;
%[3]s
}
`, pid, dir, httpConf)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command(nginx, "-t", "-q", "-c", confPath, "-p", dir).CombinedOutput(); err != nil {
		tb.Fatalf("nginx -t refuses the configuration: %v\n%s\n%s", err, out, conf)
	}
	// nginx -t leaves the pid file behind, and its appearance is what says nginx listens.
	if err := os.Remove(pid); err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
	p := StartProcess(tb, nginx, "-c", confPath, "-p", dir)
	// nginx writes its pid file after it has bound and opened every listening socket, so
	// from then on connections are accepted (queued by the kernel until nginx takes them).
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(pid); err == nil {
			return
		}
		if exited, err := p.Exited(); exited {
			tb.Fatalf("nginx exited (%v):\n%s", err, p.Output())
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nginx did not start within 10s:\n%s", p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
