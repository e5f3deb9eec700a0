# The Debian package: built from this checkout for this machine's
# architecture only (scripts/release VERSION ARCH; a release builds arm64
# too), installed with dpkg -i, checked (version, man page, bash completion,
# config, users and groups, systemd-analyze verify of the installed units),
# then purged, and checked to have left nothing behind. Needs root and dpkg;
# otherwise it says so and skips. It refuses to touch a lock-agent package,
# user or file that was there before it.
set -euo pipefail
cd "$(dirname "$0")/../.."
skip() {
	echo "50-package: SKIP: $*"
	exit 0
}
[ "$(id -u)" = 0 ] || skip "not root: dpkg -i needs root"
for tool in dpkg dpkg-deb; do
	command -v $tool >/dev/null || skip "no $tool here"
done
if dpkg-query -W -f='${Status}' lock-agent 2>/dev/null | grep -qv '^unknown\|not-installed'; then
	skip "a lock-agent package is on this machine already ($(dpkg-query -W -f='${Version} ${Status}' lock-agent)): not touching it"
fi
for path in /usr/bin/lock-agent /etc/lock-agent /var/lib/lock-agent /lib/systemd/system/lock-agent.service /lib/systemd/system/lock-agent.socket; do
	[ ! -e "$path" ] || skip "$path exists already: not touching it"
done
had_user=$(getent passwd lock-agent || true)
had_groups=$(getent group lock-agent lockers || true)

arch=$(dpkg --print-architecture)
version=0.0.0+test
work=$(mktemp -d)
installed=no
cleanup() {
	if [ $installed = yes ]; then
		dpkg -P lock-agent >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "50-package: FAIL: $*" >&2
	exit 1
}

# dpkg takes its lock or fails at once; another engineer's apt may hold it.
dpkg_locked() {
	local i
	for i in $(seq 1 60); do
		# flock: the other steps of scripts/test may be installing a
		# package meanwhile (they take the same lock).
		if out=$(flock /tmp/lock-agent-test-apt.lock "$@" 2>&1); then
			return 0
		fi
		case $out in
		*"dpkg frontend lock"* | *"dpkg status database is locked"*) sleep 1 ;;
		*) echo "$out" >&2; return 1 ;;
		esac
	done
	echo "$out" >&2
	return 1
}

start=$(date +%s)
OUT=$work scripts/release $version "$arch" >/dev/null
deb=$work/lock-agent_${version}_$arch.deb
[ -f "$deb" ] || fail "scripts/release made no $deb"
(cd "$work" && sha256sum -c --quiet SHA256SUMS) || fail "SHA256SUMS does not match"

installed=yes
dpkg_locked dpkg -i "$deb" || fail "dpkg -i"
echo "== installed $(dpkg-query -W -f='${Package} ${Version} ${Architecture}' lock-agent)"

lock-agent version | grep -q "^lock-agent $version (commit [0-9a-f]" || fail "lock-agent version: $(lock-agent version)"
lock-agent version -json | grep -q "\"version\": \"$version\"" || fail "version -json: $(lock-agent version -json)"
lock-agent validate -config /etc/lock-agent/agent.hcl >/dev/null || fail "the packaged config does not validate"
[ "$(stat -c '%a %U %G' /etc/lock-agent/agent.hcl)" = "640 root lock-agent" ] || fail "agent.hcl: $(stat -c '%a %U %G' /etc/lock-agent/agent.hcl)"
[ "$(stat -c '%a %U %G' /etc/lock-agent)" = "750 root lock-agent" ] || fail "/etc/lock-agent: $(stat -c '%a %U %G' /etc/lock-agent)"
getent passwd lock-agent >/dev/null || fail "no user lock-agent"
getent group lockers >/dev/null || fail "no group lockers"
if command -v man >/dev/null; then
	MANPAGER=cat MANWIDTH=80 man lock-agent 2>&1 | grep -q "^LOCK-AGENT(1)" || fail "man lock-agent does not render"
else
	echo "50-package: man is not installed: the page is installed, not rendered"
fi
bash -c 'source /usr/share/bash-completion/completions/lock-agent && complete -p lock-agent' | grep -q _lock_agent ||
	fail "the bash completion does not load"
if command -v systemd-analyze >/dev/null; then
	out=$(systemd-analyze verify --man=no /lib/systemd/system/lock-agent.socket /lib/systemd/system/lock-agent.service 2>&1) ||
		fail "systemd-analyze verify: $out"
	[ -z "$out" ] || fail "systemd-analyze verify warns: $out"
else
	echo "50-package: systemd-analyze is not installed: the installed units are not verified"
fi
files=$(dpkg-query -L lock-agent)

dpkg_locked dpkg -P lock-agent || fail "dpkg -P"
installed=no
echo "== purged"
left=""
for f in $files /etc/lock-agent /var/lib/lock-agent; do
	case $f in
	/ | /etc | /lib | /lib/systemd | /lib/systemd/system | /usr | /usr/bin | /usr/share | /usr/share/*/ | /usr/share/man | /usr/share/man/man1 | /usr/share/doc | \
		/usr/share/bash-completion | /usr/share/bash-completion/completions | /usr/share/zsh | /usr/share/zsh/vendor-completions | \
		/usr/share/fish | /usr/share/fish/vendor_completions.d | /.) continue ;; # shared with other packages
	esac
	[ ! -e "$f" ] || left="$left $f"
done
[ -z "$left" ] || fail "left behind after dpkg -P:$left"
[ "$(getent passwd lock-agent || true)" = "$had_user" ] || fail "the user lock-agent: before '$had_user', after '$(getent passwd lock-agent || true)'"
[ "$(getent group lock-agent lockers || true)" = "$had_groups" ] || fail "groups: before '$had_groups', after '$(getent group lock-agent lockers || true)'"
! grep -q '^lock-agent:\|^lockers:' /etc/gshadow 2>/dev/null || [ -n "$had_groups" ] || fail "left in /etc/gshadow"
dpkg-query -W lock-agent >/dev/null 2>&1 && [ "$(dpkg-query -W -f='${Status}' lock-agent)" != "unknown ok not-installed" ] &&
	fail "dpkg still knows lock-agent: $(dpkg-query -W -f='${Status}' lock-agent)"
echo "== the package installed, answered and purged cleanly in $(($(date +%s) - start))s"
