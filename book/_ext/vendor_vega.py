# SPDX-License-Identifier: BSD-3-Clause
"""Write the vendored Vega + Vega-Lite + vega-embed bundle to book/_static/vega/.

The book must render its Altair charts with the network unplugged, so the three
libraries are served from the book itself. The JavaScript comes from the PyPI
package vl-convert-python (pinned in env/requirements.lock), which ships them;
nothing is fetched from a CDN. Run after changing the Altair or vl-convert pin:

    .venv/bin/python book/_ext/vendor_vega.py

The Vega-Lite version is chosen to match the schema Altair emits. The bundle is
wrapped so that loading it more than once (Altair's loader asks for vega,
vega-lite and vega-embed in turn, all mapped to this one file) does nothing after
the first time.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

BUNDLE_NAME = "vega-bundle.js"
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "_static" / "vega"


def altair_vegalite_minor() -> str:
    """The Vega-Lite 'major.minor' that the installed Altair writes into its specs."""
    import altair as alt

    m = re.match(r"v?(\d+)\.(\d+)", alt.SCHEMA_VERSION)
    if not m:
        raise RuntimeError(f"cannot read Altair's Vega-Lite schema version from {alt.SCHEMA_VERSION!r}")
    return f"{m.group(1)}.{m.group(2)}"


def build_bundle() -> tuple[str, dict[str, str]]:
    """Return (javascript, versions) for the bundle matching the installed Altair."""
    import vl_convert as vlc

    want = altair_vegalite_minor()
    have = vlc.get_vegalite_versions()
    if want not in have:
        raise RuntimeError(
            f"vl-convert-python {vlc.__version__} ships Vega-Lite {', '.join(have)}, "
            f"but Altair writes Vega-Lite {want} specs; upgrade vl-convert-python"
        )
    versions = {
        "vega": vlc.get_vega_version(),
        "vega-lite": want,
        "vega-embed": vlc.get_vega_embed_version(),
        "vl-convert-python": vlc.__version__,
    }
    body = vlc.javascript_bundle(vl_version=want)
    header = (
        "/* Vega {vega}, Vega-Lite {vega-lite}, vega-embed {vega-embed} (BSD-3-Clause, the Vega project),\n"
        "   bundled by vl-convert-python {vl-convert-python}; written by book/_ext/vendor_vega.py.\n"
        "   Sets window.vega, window.vegaLite, window.vegaEmbed; a second load is a no-op. */\n"
    ).format(**versions)
    js = header + "(function () {\nif (window.vegaEmbed) { return; }\n" + body + "\n})();\n"
    return js, versions


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="directory to write into")
    args = ap.parse_args(argv)
    js, versions = build_bundle()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / BUNDLE_NAME
    path.write_text(js, encoding="utf-8")
    print(f"wrote {path} ({len(js)} bytes): " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
