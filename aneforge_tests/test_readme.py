"""The README's code runs as written."""
import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_taste_runs():
    text = README.read_text()
    section = text[text.index("## A taste"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(code, "README.md", "exec"), {})
    assert "aneforge.float16" in out.getvalue()
