"""The pipeline room: `Pipeline` (`pipeline.py`), what it computes each iteration
(`iteration.py`), its checkpointing (`checkpointing.py`), `pipeline_def`, and the graph's
serialization and DOT export."""
