package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCompletionKnowsEveryExecFlag: the completions read flags from -h, so
// a flag of exec's table that its -h leaves out is missing here: this
// keeps the help, the completions and the man page in step with the parser.
func TestCompletionKnowsEveryExecFlag(t *testing.T) {
	exec, _ := lookupCommand("exec")
	got := flagsOf(exec)
	for _, spec := range execFlagSpecs {
		for _, n := range spec.names {
			if !slices.Contains(got, "-"+n) && !slices.Contains(got, "--"+n) {
				t.Errorf("exec -h does not document -%s (or --%s); the completion has %q", n, n, got)
			}
		}
	}
	elect, _ := lookupCommand("elect")
	for _, refused := range []string{"-s", "--shared", "-limit", "-F", "--no-fork"} {
		if slices.Contains(flagsOf(elect), refused) {
			t.Errorf("elect's completion offers %s, which elect -h says it refuses", refused)
		}
	}
	if !slices.Contains(flagsOf(elect), "-value") || !slices.Contains(flagsOf(elect), "--timeout") {
		t.Errorf("elect's completion lacks exec's flags: %q", flagsOf(elect))
	}
	run, _ := lookupCommand("run")
	if got := flagsOf(run); !slices.Equal(got, []string{"-config", "-dev"}) {
		t.Errorf("run's flags: %q", got)
	}
}

// TestBashCompletionLoadsAndCompletes sources the script in bash and asks
// it for a command and for exec's flags.
func TestBashCompletionLoadsAndCompletes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := filepath.Join(t.TempDir(), "lock-agent.bash")
	code, stdout, _ := runMain("completion", "bash")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	os.WriteFile(script, []byte(stdout), 0o600)
	out, err := exec.Command(bash, "-c", `source "$1" && complete -p lock-agent &&
		COMP_WORDS=(lock-agent ex); COMP_CWORD=1; _lock_agent; echo "words: ${COMPREPLY[*]}" &&
		COMP_WORDS=(lock-agent exec --time); COMP_CWORD=2; _lock_agent; echo "flags: ${COMPREPLY[*]}"`, "bash", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"complete -F _lock_agent lock-agent", "words: exec", "flags: --timeout"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestZshAndFishCompletionsParse: zsh -n and fish -n accept them, where
// those shells are installed.
func TestZshAndFishCompletionsParse(t *testing.T) {
	for _, shell := range []string{"zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			code, stdout, _ := runMain("completion", shell)
			if code != 0 || !strings.Contains(stdout, "exec") {
				t.Fatalf("exit %d\n%s", code, stdout)
			}
			path, err := exec.LookPath(shell)
			if err != nil {
				t.Skipf("%s is not installed: only generated", shell)
			}
			script := filepath.Join(t.TempDir(), "lock-agent."+shell)
			os.WriteFile(script, []byte(stdout), 0o600)
			if out, err := exec.Command(path, "-n", script).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", shell, err, out)
			}
			// Loaded, it completes: fish answers a command line; zsh registers the function.
			check, want := `autoload -U compinit && compinit -u && source "$1" && echo "${_comps[lock-agent]}"`, "_lock_agent"
			if shell == "fish" {
				check, want = `source $argv[1]; and complete -C"lock-agent exec --ti"`, "--timeout"
			}
			args := []string{"-c", check, script}
			if shell == "zsh" {
				args = []string{"-f", "-c", check, "zsh", script}
			}
			cmd := exec.Command(path, args...)
			cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir())
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), want) {
				t.Fatalf("%s: %v, want %q in:\n%s", shell, err, want, out)
			}
		})
	}
}

// TestManPageRenders: man -l renders the page, with every command's -h in
// it, and without roff's complaints.
func TestManPageRenders(t *testing.T) {
	code, page, _ := runMain("man")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	man, err := exec.LookPath("man")
	if err != nil {
		t.Skip("man is not installed: the page is only generated")
	}
	file := filepath.Join(t.TempDir(), "lock-agent.1")
	os.WriteFile(file, []byte(page), 0o600)
	cmd := exec.Command(man, "--warnings", "-l", file)
	cmd.Env = append(os.Environ(), "MANWIDTH=100", "MANPAGER=cat", "PAGER=cat")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{"LOCK-AGENT(1)", "usage: lock-agent exec [flags] NAME", "-E, --conflict-exit-code, -conflict-exit N",
		"usage: lock-agent who [-socket PATH] [-json] NAME", "EXIT STATUS", "LOCK_AGENT_SOCKET"} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	if strings.Contains(text, "warning") {
		t.Errorf("roff warns:\n%s", text)
	}
}
