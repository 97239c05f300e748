"""The user guide (docs/guide.md, with the docs/report.png it embeds) builds with MkDocs in strict mode.

`mkdocs.yml` at the repository root makes every link problem a warning (a missing page, an absolute link, an
unrecognised link, a missing anchor) and `--strict` makes a warning fail the build; a planted broken link
proves it does.
"""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide.md"


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of the project at `root` into `site`."""
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120)


def test_the_guide_builds_strictly(tmp_path):
    site = tmp_path / "site"
    result = build(ROOT, site)
    assert result.returncode == 0, result.stderr
    page = site / "guide" / "index.html"
    html = page.read_text(encoding="utf-8")
    title = GUIDE.read_text(encoding="utf-8").splitlines()[0].removeprefix("# ")
    assert title == "bayesgrpo user guide"
    assert title in html
    assert 'src="../report.png"' in html
    assert (site / "report.png").read_bytes() == (ROOT / "docs" / "report.png").read_bytes()


def test_a_broken_link_fails_the_build(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(ROOT / "docs", project / "docs")
    shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    with (project / "docs" / "guide.md").open("a", encoding="utf-8") as guide:
        guide.write("\n[x](missing.md)\n")
    result = build(project, tmp_path / "site")
    assert result.returncode != 0
    assert "missing.md" in result.stderr
