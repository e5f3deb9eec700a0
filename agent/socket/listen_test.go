package socket

import (
	"net"
	"os"
	"path/filepath"
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
