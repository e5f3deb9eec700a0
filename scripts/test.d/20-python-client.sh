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
