"""Look at a rendered report the way a person would: headless Chromium for the HTML, pdftoppm for the PDF.

Uses Debian's ``chromium`` + ``chromium-driver`` (driven by PyPI ``selenium``) and ``poppler-utils``;
``.ci/run`` installs them when missing, and without them the tests that need them are skipped and say
why (as ``_postgres.py`` does for PostgreSQL). Screenshots and page images are kept under
``$FREEZESTATS_ARTIFACTS`` (default ``test-artifacts/`` in the repo).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WRITTEN: list[Path] = []

#: For every figure image: its rendered size and, for <img>, whether it decoded (naturalWidth).
_FIGURES_JS = """
return Array.from(document.querySelectorAll('figure img, figure svg, img')).map(function (el) {
  var r = el.getBoundingClientRect();
  var style = window.getComputedStyle(el);
  return {
    tag: el.tagName.toLowerCase(),
    width: r.width,
    height: r.height,
    natural: el.tagName.toLowerCase() === 'img' ? el.naturalWidth : -1,
    complete: el.tagName.toLowerCase() === 'img' ? el.complete : true,
    visible: style.visibility !== 'hidden' && style.display !== 'none' && el.offsetParent !== null,
    label: (el.getAttribute('aria-label') || el.getAttribute('alt') || '').slice(0, 60)
  };
});
"""


def artifacts_dir() -> Path:
    path = Path(os.environ.get("FREEZESTATS_ARTIFACTS", REPO / "test-artifacts")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def find_chromium() -> tuple[str, str] | None:
    """(browser, driver) executables, or None when Debian's chromium / chromium-driver are not installed."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def open_html(path: Path, screenshot: Path | None = None) -> tuple[list[dict], list[dict], str]:
    """Load ``path`` offline in headless Chromium; returns (console errors, figure info, page title)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = find_chromium()
    if found is None:  # callers skip first; this is a safety net
        raise RuntimeError("chromium and chromium-driver are not installed")
    browser, driver_path = found
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        driver.get(path.resolve().as_uri())
        driver.execute_script("return document.readyState")
        figures = driver.execute_script(_FIGURES_JS)
        errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        title = driver.title
        if screenshot is not None:
            driver.save_screenshot(str(screenshot))
            WRITTEN.append(screenshot)
    finally:
        driver.quit()
    return errors, figures, title


def pdf_pages(pdf: Path, out_prefix: Path, dpi: int = 50) -> list[Path]:
    """Every page of ``pdf`` as a PNG (pdftoppm); returns them in page order."""
    if shutil.which("pdftoppm") is None:
        raise RuntimeError("pdftoppm is not installed")
    subprocess.run(["pdftoppm", "-r", str(dpi), "-png", str(pdf), str(out_prefix)], check=True, timeout=120)
    pages = sorted(out_prefix.parent.glob(out_prefix.name + "-*.png"))
    WRITTEN.extend(pages)
    return pages


def page_texts(pdf: Path) -> list[str]:
    """The text of each page (pdftotext separates pages with form feeds)."""
    out = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True)
    return out.stdout.split("\f")


def colored_pixels(png: Path) -> int:
    """Pixels that are clearly coloured (not white, grey or black): plots have them, text pages do not."""
    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(png).convert("RGB")).astype(int)
    spread = rgb.max(axis=2) - rgb.min(axis=2)
    return int((spread > 40).sum())


def largest_empty_band(png: Path) -> float:
    """The tallest band of blank rows in a page's body (header and page number cut off), as a share of it: a
    page that a float left near-empty has one over half its height."""
    import numpy as np
    from PIL import Image

    grey = np.asarray(Image.open(png).convert("L"))
    body = grey[int(0.06 * grey.shape[0]) : int(0.9 * grey.shape[0])]
    longest = run = 0
    for inked in (body < 200).any(axis=1):
        run = 0 if inked else run + 1
        longest = max(longest, run)
    return longest / len(body)
