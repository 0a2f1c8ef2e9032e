"""The model of the hardware: what an ANE is and computes. `targets` (the families, their
caps and op support, from `data/`), `limits` (the caps checked as each op is recorded),
`numerics` (the simulator's numerics model per target), `hazards` (warnings where a value hits
a hardware cliff) and `kernels` (the datapath: fp16 rounding, the tile-of-4 matmul, in numpy
and compiled with numba)."""
