"""R's reference numbers for a cross-check: fresh from R when Rscript and the packages are here, else the JSON
committed beside the script (so the comparison runs everywhere and re-runs R wherever it can)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

DATA = Path(__file__).parent / "data"


def r_reference(script: str, fixture: str, committed: str, packages: tuple[str, ...], out_dir: Path) -> dict:
    """Run ``DATA/script`` on ``DATA/fixture`` into ``out_dir`` when R can, else read ``DATA/committed``."""
    rscript = shutil.which("Rscript")
    if rscript is not None:
        names = ", ".join(f'"{p}"' for p in packages)
        check = f"quit(status = !all(sapply(c({names}), requireNamespace, quietly = TRUE)))"
        if subprocess.run([rscript, "-e", check], capture_output=True).returncode == 0:
            out = out_dir / "fresh.json"
            subprocess.run(
                [rscript, str(DATA / script), str(DATA / fixture), str(out)],
                check=True,
                capture_output=True,
                timeout=240,
            )
            return json.loads(out.read_text())
    return json.loads((DATA / committed).read_text())
