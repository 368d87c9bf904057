"""Code style is part of the suite: ruff must pass on the whole tree."""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ruff_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    result = subprocess.run([ruff, "check", "."], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_python_files_stay_small():
    too_long = {str(p.relative_to(REPO)): n for p in REPO.rglob("*.py")
                if ".venv" not in p.parts and (n := len(p.read_text().splitlines())) > 400}
    assert not too_long, f"files over 400 lines: {too_long}"
