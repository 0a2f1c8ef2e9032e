"""The benchmark sections run (at small sizes) and report what they promise."""
import aneforge.bench as bench
from aneforge.bench import settings
from aneforge.bench.__main__ import main


def test_every_section_runs_quick(capsys, monkeypatch):
    monkeypatch.setattr(settings, "matmul_size", settings.matmul_size)
    monkeypatch.setattr(settings, "steps", settings.steps)
    main(["--quick"])
    out = capsys.readouterr().out
    for name in bench.SECTIONS:
        assert f"[{name}]" in out
    rows = {name.strip(): value for name, value, _ in bench.SECTIONS["training"]()}
    assert rows["compiles over 12 steps"] == 1
    assert rows["ratio aneforge / torch, batch 64"] > 0
