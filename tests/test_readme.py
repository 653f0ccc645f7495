"""The README's Python examples run, in order, in one namespace (as a reader would paste
them).  Skipped where the README is not beside tests/ (the wheel's test run copies only
tests/ and pyproject.toml)."""
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _python_blocks(text):
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


@pytest.mark.skipif(not README.is_file(), reason="no README.md beside tests/")
def test_readme_python_examples_run():
    pytest.importorskip("threadpoolctl")
    blocks = _python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    namespace = {"__name__": "readme"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)
    ns = namespace
    assert ns["gi"].shape == ns["x"].shape and ns["gim"].shape == ns["x"].shape
