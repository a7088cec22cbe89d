"""The execution room: the executor that computes iterations ahead of the caller."""
