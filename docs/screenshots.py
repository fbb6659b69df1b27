"""Screenshots of the built site in headless Chromium with the network cut off (``make docs``).

    python docs/screenshots.py [SITE_DIR]      (default: build/site)

Writes ``SITE_DIR/screenshots/paper-P17.png`` (a paper page: derivation with typeset equations)
and ``SITE_DIR/screenshots/api-lrnn.png`` (an API page with display equations), 1280 px wide.
Every host name resolves to nothing (``--host-resolver-rules``) and no proxy is used, so a page
that needed a CDN, a web font or any other remote file would show it missing. Exits 0 with a
message when no Chromium is installed (``apt-get install chromium``): the screenshots are a check
for a person, the test suite checks the HTML itself.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PAGES = {
    "paper-P17.png": ("papers/P17/index.html", 2400),
    "api-lrnn.png": ("reference/jaxpapers.lrnn/index.html", 3200),
}
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    """The first headless-capable Chromium on PATH, or None."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def screenshot(browser: str, page: Path, out: Path, height: int) -> None:
    """One full-width screenshot of ``page`` (a local file) with no network."""
    subprocess.run(
        [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-proxy-server",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--window-size=1280,{height}",
            f"--screenshot={out}",
            page.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    if not out.is_file() or out.stat().st_size == 0:
        raise RuntimeError(f"{browser} wrote no screenshot of {page}")


def main(argv: list[str]) -> int:
    site = Path(argv[0] if argv else "build/site")
    browser = find_browser()
    if browser is None:
        print("docs/screenshots.py: no Chromium on PATH, no screenshots taken")
        return 0
    shots = site / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    for name, (page, height) in PAGES.items():
        if not (site / page).is_file():
            print(f"docs/screenshots.py: {site / page} is missing; build the site first")
            return 1
        screenshot(browser, site / page, shots / name, height)
        print(f"wrote {shots / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
