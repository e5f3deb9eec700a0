package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docBlock returns the shell lines between <!-- NAME: begin --> and
// <!-- NAME: end --> in a Markdown file, fences left out.
func docBlock(t *testing.T, path, name string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?s)<!-- ` + name + `: begin -->\n` + "```sh\n(.*?)```\n" + `<!-- ` + name + `: end -->`)
	m := re.FindSubmatch(data)
	if m == nil {
		t.Fatalf("no %s block in %s", name, path)
	}
	return string(m[1])
}

// unitSettings reads the [Service] settings of a systemd unit file.
func unitSettings(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	settings := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			settings[k] = v
		}
	}
	return settings
}

// TestInstallStepsWork runs the build and install steps of
// docs/operations.md as written, as root, in a private mount namespace
// where /etc is a copy and /usr/local/bin and /run are empty: the host is
// not changed. systemctl is the one command not run; in its place the unit
// is checked with systemd-analyze verify and started the way systemd would
// (its User, Group, SupplementaryGroups and RuntimeDirectory). Then a member
// of the socket's group can reach the agent and another user cannot.
func TestInstallStepsWork(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the install steps add users and groups (in a private copy of /etc)")
	}
	for _, tool := range []string{"unshare", "useradd", "groupadd", "usermod", "setpriv", "runuser", "systemd-analyze", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	if err := exec.Command("unshare", "-m", "true").Run(); err != nil {
		t.Skipf("cannot make a mount namespace: %v", err)
	}
	build := docBlock(t, "../docs/operations.md", "build")
	install := docBlock(t, "../docs/operations.md", "install")
	unit := unitSettings(t, "../examples/systemd/lock-agent.service")
	if unit["User"] == "" || unit["Group"] == "" || unit["RuntimeDirectory"] == "" {
		t.Fatalf("unit lacks User, Group or RuntimeDirectory: %v", unit)
	}

	scratch := t.TempDir()
	src := filepath.Join(scratch, "src") // a checkout: the steps run from one
	if out, err := exec.Command("sh", "-c", `mkdir -p "$1" && tar -C .. --exclude=.git --exclude=./lock-agent -cf - . | tar -C "$1" -xf -`, "sh", src).CombinedOutput(); err != nil {
		t.Fatalf("copying the checkout: %v %s", err, out)
	}
	runDir := "/run/" + unit["RuntimeDirectory"]
	sock := runDir + "/agent.sock"
	groups := unit["Group"]
	if g := unit["SupplementaryGroups"]; g != "" {
		groups += "," + strings.ReplaceAll(g, " ", ",")
	}
	asService := fmt.Sprintf("setpriv --reuid=%s --regid=%s --groups=%s --", unit["User"], unit["Group"], groups)
	script := `set -eu
# The sandbox: a private copy of /etc, empty /usr/local/bin and /run.
mount --make-rprivate /
mkdir -p "$S/etc" "$S/bin"
cp -a /etc/. "$S/etc/"
mount --bind "$S/etc" /etc
mount --bind "$S/bin" /usr/local/bin
mount -t tmpfs tmpfs /run
useradd -M alice
useradd -M bob
systemctl() { echo "(not run here) systemctl $*"; }
export REDIS_PASSWORD=s3cret

cd "$SRC"
echo "== build"
` + build + `
echo "== install"
` + install + `
echo "== checks"
test "$(stat -c '%a %U %G' /usr/local/bin/lock-agent)" = "755 root root"
test "$(stat -c '%a %U %G' /etc/lock-agent)" = "750 root lock-agent"
test "$(stat -c '%a %U %G' /etc/lock-agent/agent.hcl)" = "640 root lock-agent"
test "$(stat -c '%a %U %G' /etc/lock-agent/redis.pass)" = "640 root lock-agent"
test "$(cat /etc/lock-agent/redis.pass)" = s3cret
if runuser -u bob -- cat /etc/lock-agent/redis.pass 2>/dev/null; then echo "bob can read the password"; exit 1; fi
systemd-analyze verify /etc/systemd/system/lock-agent.service

echo "== the unit, started as systemd would"
install -d -m ` + unit["RuntimeDirectoryMode"] + ` -o ` + unit["User"] + ` -g ` + unit["Group"] + ` ` + runDir + `
` + asService + ` ` + unit["ExecStartPre"] + `
` + asService + ` ` + unit["ExecStart"] + ` 2>"$S/agent.log" &
agent=$!
i=0; until test -S ` + sock + `; do i=$((i+1)); test $i -lt 500 || { cat "$S/agent.log"; exit 1; }; sleep 0.02; done
test "$(stat -c '%a %U %G' ` + sock + `)" = "660 lock-agent lockers"
# alice (in lockers) reaches the agent: status answers, 3 = no quorum (the
# sample's masters do not exist here); bob cannot connect: 1.
set +e
runuser -u alice -- /usr/local/bin/lock-agent status -socket ` + sock + `; alice=$?
runuser -u bob -- /usr/local/bin/lock-agent status -socket ` + sock + `; bob=$?
set -e
kill -TERM $agent; wait $agent
echo "alice=$alice bob=$bob"
test $alice = 3 && test $bob = 1
echo "== installed"
`
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "S="+scratch, "SRC="+src)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "== installed") {
		t.Fatalf("the documented install failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
