"""The graph room: `DataNode`, `Operator`, and the "pipeline being defined" scope below both
the graph and the pipeline."""
