package socket

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestListenNeverReplacesWhatIsNotAStaleSocket: whatever stands at the
// socket's path is left alone unless it is a socket nobody answers on.
func TestListenNeverReplacesWhatIsNotAStaleSocket(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, path string)
		wantErr string // "" when Listen must succeed
	}{
		{"nothing at the path is a new socket", func(*testing.T, string) {}, ""},
		{"a regular file is refused and kept", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "is not a socket"},
		{"a directory is refused", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "is not a socket"},
		{"a symlink is refused, not followed", func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Join(filepath.Dir(path), "elsewhere"), path); err != nil {
				t.Fatal(err)
			}
		}, "is not a socket"},
		{"a socket another process listens on is refused", func(t *testing.T, path string) {
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
		}, "is in use"},
		{"a stale socket nobody answers on is replaced", func(t *testing.T, path string) {
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close()
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.sock")
			tc.prepare(t, path)
			before, _ := os.Lstat(path)
			ln, fromSystemd, err := Listen(path, 0o640, "")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Listen = %v, want an error saying %q", err, tc.wantErr)
				}
				after, lerr := os.Lstat(path)
				if lerr != nil || after.Mode() != before.Mode() || after.ModTime() != before.ModTime() {
					t.Fatalf("what stood at the path was touched: before %v, after %v (%v)", before, after, lerr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Listen: %v", err)
			}
			defer ln.Close()
			if fromSystemd {
				t.Fatal("a socket this test opened was taken for systemd's")
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o640 {
				t.Fatalf("socket mode %v, want a socket with 0640", fi.Mode())
			}
			conn, err := net.Dial("unix", path)
			if err != nil {
				t.Fatalf("dial the new socket: %v", err)
			}
			conn.Close()
		})
	}
}

// TestListenLeavesTheProcessUmaskAlone: the socket is made owner-only
// without changing the process's umask, which every thread shares: a file
// or directory that another goroutine created meanwhile (an agent in a
// test binary beside a build, a library's temp file) was made with mode
// 0600, a directory nobody may enter and a binary nobody may run ("fork/exec
// .../lock-agent: permission denied" for tests that built the agent while
// an agent in the same process opened its socket).
func TestListenLeavesTheProcessUmaskAlone(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	created := make(chan []string)
	go func() {
		var narrowed []string
		for i := 0; ; i++ {
			select {
			case <-stop:
				created <- narrowed
				return
			default:
			}
			path := filepath.Join(dir, "f"+strconv.Itoa(i))
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o777)
			if err != nil {
				t.Error(err)
				continue
			}
			fi, _ := f.Stat()
			f.Close()
			os.Remove(path)
			if fi.Mode().Perm()&0o100 == 0 {
				narrowed = append(narrowed, fi.Mode().String())
			}
		}
	}()
	for i := range 300 {
		path := filepath.Join(dir, "s"+strconv.Itoa(i)+".sock")
		ln, _, err := Listen(path, 0o600, "")
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("socket %s: %v %v, want mode 0600", path, fi.Mode(), err)
		}
		ln.Close()
	}
	close(stop)
	if narrowed := <-created; len(narrowed) > 0 {
		t.Fatalf("%d files made while sockets were opened lost the owner's x bit (%v): the umask was changed for the whole process", len(narrowed), narrowed[0])
	}
}
