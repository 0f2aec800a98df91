#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Create/refresh the project's virtual environment from the pinned lock.
# usage: env/setup-venv.sh VENV LOCK PYTHON
# Idempotent: pip installs only what differs from the lock. The package itself is
# not pip-installed in development: a .pth puts src/ on the path and `make build`
# compiles nvmelab._native into src/nvmelab (see src/README.md).
set -euo pipefail
venv=${1:-.venv}; lock=${2:-env/requirements.lock}; python=${3:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -r "$lock"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$root/src" > "$site/nvmelab-dev.pth"
# A console script for the development tree (pip would make this for an installed package).
cat > "$venv/bin/nvmelab" <<SH
#!/bin/sh
exec "$root/$venv/bin/python" -m nvmelab "\$@"
SH
chmod +x "$venv/bin/nvmelab"
# Any Python kernel name used by the notebooks resolves to this environment.
"$venv/bin/python" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (nvmelab)" >/dev/null
