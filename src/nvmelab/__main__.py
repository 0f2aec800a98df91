# SPDX-License-Identifier: BSD-3-Clause
import sys

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while the package is still being imported: one line, like later
    sys.stderr.write("nvmelab: interrupted\n")
    raise SystemExit(130) from None

raise SystemExit(main())
