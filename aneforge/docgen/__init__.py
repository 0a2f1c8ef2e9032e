"""Writers of generated documentation pages, each checked against its page by a test:
`python -m aneforge.docgen.torch_coverage --write` (docs/torch_coverage.md, from
aneforge/_api.py's table) and `python -m aneforge.docgen.capabilities --write`
(docs/capabilities.md, from the target tables)."""
