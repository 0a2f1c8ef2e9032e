"""The suite pins the simulator: unless ANEFORGE_BACKEND says otherwise, every test (and doctest)
runs on `sim`, also on a Mac. aneforge_tests/test_macos.py picks the hardware backends itself."""
import os

os.environ.setdefault("ANEFORGE_BACKEND", "sim")
