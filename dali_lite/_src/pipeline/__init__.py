"""The pipeline room: the `Pipeline` object, its run protocol, its options' checks,
`pipeline_def`, and the graph's serialization and DOT export."""
