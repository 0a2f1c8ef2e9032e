"""python -m aneforge.bench [--quick] [section ...]: run the benchmark sections and print their\ntables (`speed`: aneforge against torch eager with the same thread count, one table)."""
import platform
import sys

from . import SECTIONS, report, settings
from . import core, passes, speed, training  # noqa: F401  (they register their sections)


def main(argv: list[str]) -> None:
    if "--quick" in argv:
        settings.quick()
        argv = [a for a in argv if a != "--quick"]
    names = argv or list(SECTIONS)
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        sys.exit(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    print(f"aneforge.bench on {platform.machine()} {platform.python_version()}, backend sim; "
          f"{speed.machine()}")
    for name in names:
        print(f"\n[{name}]")
        if name == "speed":                  # the one comparison table
            print(speed.table(speed.measure()))
        else:
            print(report(SECTIONS[name]()))


if __name__ == "__main__":
    main(sys.argv[1:])
