"""Execute the walkthrough notebooks with small sampling settings (issue: notebooks run in CI)."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a kernel start and real sampling per notebook: 5-150 s each

NB_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(p.name for p in NB_DIR.glob("*.ipynb"))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes(name, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("BAYESGRPO_NB_DRAWS", "150")
    nb = nbformat.read(NB_DIR / name, as_version=4)
    assert any("BAYESGRPO_NB_DRAWS" in c.source for c in nb.cells if c.cell_type == "code"), (
        "the notebook must read BAYESGRPO_NB_DRAWS"
    )
    # probe cell: what the kernel itself saw (a check of the test's own os.environ could not fail)
    nb.cells.append(nbformat.v4.new_code_cell('import os; print(repr(os.environ.get("BAYESGRPO_NB_DRAWS")), DRAWS)'))
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NB_DIR)}}
    )
    client.execute()
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors
    probe = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    assert probe.strip() == "'150' 150", f"the notebook kernel did not run with the small sampling setting: {probe!r}"
