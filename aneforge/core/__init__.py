"""The core between the torch-facing front and the engine: `trace` records ops as Nodes (with
each node's prekey), `realization` cuts the pending subgraph into a Program, keys it, compiles
it once per signature through the passes and a backend, and runs it; `scalar_consts` keeps
Python numbers fp16 cannot hold exact. `aneforge.autograd` (the reverse walk) sits beside
them, at torch's path."""
