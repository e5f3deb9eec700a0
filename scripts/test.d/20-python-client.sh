# The Python client: its unittest suite against the real agent, and a check
# that `pip install ./clients/python` builds and installs it (the in-tree
# backend needs nothing from the network).
set -euo pipefail
cd clients/python
python3 -m unittest discover -s . -p 'test_*.py' -t .
target=$(mktemp -d)
trap 'rm -rf "$target"' EXIT
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$target" .
( cd "$target" && python3 -c "import lockagent, lockagent.aio; print('pip install ./clients/python: lockagent', lockagent.__version__)" )
# The wheel, as a user outside this repository gets it: pip's own wheel
# build with the in-tree backend (no network, no build isolation), installed
# into a fresh venv from that file alone, and imported there.
python3 -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation --wheel-dir "$target/dist" .
python3 -m venv "$target/venv"
"$target/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index "$target"/dist/lockagent-*.whl
(cd / && "$target/venv/bin/python" -c "import lockagent, lockagent.aio; print('wheel in a fresh venv: lockagent', lockagent.__version__)")
