"""The pipeline room: `Pipeline` (`pipeline.py`, with its mixins `run_protocol` and
`persistence`), `pipeline_def`, and the graph's serialization and DOT export."""
