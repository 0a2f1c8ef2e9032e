"""python -m aneforge.bench [section ...]: run the benchmark sections and print their tables."""
import platform
import sys

from . import SECTIONS, report, settings
from . import core, passes, training  # noqa: F401  (they register their sections)


def main(argv: list[str]) -> None:
    if "--quick" in argv:
        settings.quick()
        argv = [a for a in argv if a != "--quick"]
    names = argv or list(SECTIONS)
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        sys.exit(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    print(f"aneforge.bench on {platform.machine()} {platform.python_version()}, backend sim")
    for name in names:
        print(f"\n[{name}]")
        print(report(SECTIONS[name]()))


if __name__ == "__main__":
    main(sys.argv[1:])
